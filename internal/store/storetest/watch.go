package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

func watch(t *testing.T, s store.Store) <-chan store.Event {
	t.Helper()
	ch, err := s.Watch(t.Context())
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return ch
}

// Next returns the next event or fails the test after Wait.
func Next(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed early")
		}
		return ev
	case <-time.After(Wait):
		t.Fatalf("no event within %s", Wait)
	}
	panic("unreachable")
}

func expect(t *testing.T, ch <-chan store.Event, typ store.EventType, uuid string) store.Event {
	t.Helper()
	ev := Next(t, ch)
	if ev.Type != typ || ev.LoadBalancer == nil || ev.LoadBalancer.UUID != uuid {
		t.Fatalf("event = %s, want %s %s", describe(ev), typ, uuid)
	}
	return ev
}

func describe(ev store.Event) string {
	if ev.LoadBalancer == nil {
		return string(ev.Type) + " <nil>"
	}
	return fmt.Sprintf("%s %s (name %q)", ev.Type, ev.LoadBalancer.UUID, ev.LoadBalancer.Name)
}

func testWatchReplay(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("b"))
	mustPut(t, s, Sample("a"))
	ch := watch(t, s)
	expect(t, ch, store.EventPut, "a")
	expect(t, ch, store.EventPut, "b")

	mustPut(t, s, Sample("c"))
	expect(t, ch, store.EventPut, "c")
	mustReport(t, s, "a", model.NodeStatus{Node: "node-a", State: model.StateActive})
	if ev := expect(t, ch, store.EventPut, "a"); ev.LoadBalancer.Status.State != model.StateActive {
		t.Fatalf("PUT after PutNodeStatus carries state %q, want ACTIVE", ev.LoadBalancer.Status.State)
	}
	if err := s.Delete(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	ev := expect(t, ch, store.EventDelete, "b")
	want := Sample("b")
	want.Status.State = model.StatePending
	assertEqual(t, "DELETE carries the last stored value", ev.LoadBalancer, want)
}

func testWatchOrdering(t *testing.T, s store.Store) {
	ch := watch(t, s)
	// Written in descending order to show that live events follow write
	// order, not UUID order.
	var want []string
	for i := 29; i >= 0; i-- {
		id := fmt.Sprintf("u%02d", i)
		want = append(want, id)
		mustPut(t, s, Sample(id))
	}
	for _, id := range want {
		expect(t, ch, store.EventPut, id)
	}
}

// testWatchSlowReader: a watcher that does not read never holds up
// writers. A writer held up stops making progress, so the test fails when
// no write completes for Wait; a slow machine (a race build beside other
// work) only makes the writes slower, which is no failure.
func testWatchSlowReader(t *testing.T, s store.Store) {
	const writes = 300
	ch := watch(t, s) // nobody reads until every write is done
	done := make(chan error, 1)
	var written atomic.Int64
	go func() {
		for i := range writes {
			lb := Sample("x")
			lb.Name = fmt.Sprintf("v%d", i)
			if err := s.PutSpec(context.Background(), lb); err != nil {
				done <- err
				return
			}
			written.Add(1)
		}
		done <- nil
	}()
	var seen int64 = -1
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		case <-time.After(Wait):
			n := written.Load()
			if n == seen {
				t.Fatalf("writes stalled at %d of %d for %s while a watcher was not reading", n, writes, Wait)
			}
			seen = n
		}
	}
	last := fmt.Sprintf("v%d", writes-1)
	for n := 1; ; n++ {
		ev := expect(t, ch, store.EventPut, "x")
		if ev.LoadBalancer.Name == last {
			t.Logf("%d writes reached the slow reader as %d events", writes, n)
			return
		}
	}
}

func testWatchDeleteNotLost(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("x"))
	ch := watch(t, s)
	next := Sample("x")
	next.Name = "v2"
	mustPut(t, s, next)
	if err := s.Delete(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, Sample("y")) // marks the end
	var last store.Event
	for {
		ev := Next(t, ch)
		if ev.LoadBalancer.UUID == "y" {
			break
		}
		last = ev
	}
	if last.Type != store.EventDelete || last.LoadBalancer.UUID != "x" {
		t.Fatalf("last event for x = %s, want DELETE x", describe(last))
	}
}

func testWatchDeleteRecreate(t *testing.T, s store.Store) {
	ch := watch(t, s)
	mustPut(t, s, Sample("x"))
	if err := s.Delete(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	again := Sample("x")
	again.Name = "recreated"
	mustPut(t, s, again)

	sawDelete := false
	for {
		ev := Next(t, ch)
		switch {
		case ev.Type == store.EventDelete:
			sawDelete = true
		case ev.LoadBalancer.Name == "recreated":
			if !sawDelete {
				t.Fatal("the recreated object arrived without the DELETE before it")
			}
			return
		case sawDelete:
			t.Fatalf("after DELETE got %s, want the recreated object", describe(ev))
		}
	}
}

func testWatchNoOp(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("x"))
	ch := watch(t, s)
	expect(t, ch, store.EventPut, "x")
	mustPut(t, s, Sample("x"))
	mustPut(t, s, Sample("y"))
	expect(t, ch, store.EventPut, "y")
}

func testWatchEnds(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("x"))
	ctx, cancel := context.WithCancel(t.Context())
	ch, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	deadline := time.After(Wait)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("watch channel still open %s after its context ended", Wait)
		}
	}
}

func testWatchCopies(t *testing.T, s store.Store) {
	mustPut(t, s, Sample("x"))
	ch1, ch2 := watch(t, s), watch(t, s)
	ev1 := expect(t, ch1, store.EventPut, "x")
	ev1.LoadBalancer.Pools[0].Members[0].Address = "changed-by-reader-1"
	ev2 := expect(t, ch2, store.EventPut, "x")
	want := Sample("x")
	want.Status.State = model.StatePending
	assertEqual(t, "second watcher's copy", ev2.LoadBalancer, want)
	assertEqual(t, "stored value", mustGet(t, s, "x"), want)
}

// testConcurrentWriters runs writers on shared UUIDs (run it with -race)
// and checks that a concurrent watcher converges on what the store holds.
func testConcurrentWriters(t *testing.T, s store.Store) {
	const writers, rounds, ids = 6, 20, 3
	ch := watch(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, writers*rounds)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				id := fmt.Sprintf("c%d", (w+r)%ids)
				lb := Sample(id)
				lb.Name = fmt.Sprintf("w%d-r%d", w, r)
				if err := s.PutSpec(context.Background(), lb); err != nil {
					errs <- err
				}
				report := model.NodeStatus{Node: lb.Placement.Active, State: model.StateActive, Message: lb.Name}
				if err := s.PutNodeStatus(context.Background(), id, report); err != nil {
					errs <- err
				}
				if _, err := s.List(context.Background()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	lbs, err := s.List(t.Context())
	if err != nil || len(lbs) != ids {
		t.Fatalf("List = %d items, %v; want %d", len(lbs), err, ids)
	}
	want := map[string]string{}
	for _, lb := range lbs {
		want[lb.UUID] = encode(lb)
	}
	seen := map[string]string{}
	for !maps.Equal(seen, want) {
		ev := Next(t, ch)
		if ev.Type == store.EventDelete {
			t.Fatalf("unexpected %s", describe(ev))
		}
		seen[ev.LoadBalancer.UUID] = encode(ev.LoadBalancer)
	}
}

func encode(lb *model.LoadBalancer) string {
	b, err := json.Marshal(lb)
	if err != nil {
		panic(err)
	}
	return string(b)
}
