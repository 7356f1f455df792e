package bolt

import (
	"path/filepath"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
)

// holdFlusher stops s's flusher, so that a member change stays pending
// until a write or Close takes it. Close still works.
func holdFlusher(s *Store) {
	close(s.flushDone)
	s.flushWG.Wait()
	s.flushDone = make(chan struct{})
}

// inFile decodes what the file itself holds for uuid (nil: nothing).
func inFile(t *testing.T, s *Store, uuid string) *model.LoadBalancer {
	t.Helper()
	var lb *model.LoadBalancer
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketLBs).Get([]byte(uuid))
		if raw == nil {
			return nil
		}
		var err error
		lb, err = decode(raw)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

func withMember(lb *model.LoadBalancer, addr string) *model.LoadBalancer {
	c := lb.Clone()
	c.Pools[0].Members = []model.Member{{Address: addr, Port: 8080, Weight: 1}}
	return c
}

func firstMember(lb *model.LoadBalancer) string {
	if lb == nil || len(lb.Pools) == 0 || len(lb.Pools[0].Members) == 0 {
		return ""
	}
	return lb.Pools[0].Members[0].Address
}

// nextEvent waits for the watch's next event.
func nextEvent(t *testing.T, events <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event within 5 s")
		return store.Event{}
	}
}

// TestPutMembersWritesBehind: a change of members alone reaches watchers,
// Get, List and a new watch's replay before the file holds it; the next
// write (a report here) writes it in its own transaction, before its own
// change; Close writes what is still pending.
func TestPutMembersWritesBehind(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pier.db")
	s := open(t, path)
	ctx := t.Context()
	lb := storetest.Sample("a")
	if err := s.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	events, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	nextEvent(t, events) // the replay
	holdFlusher(s)

	if err := s.PutMembers(ctx, withMember(lb, "10.0.0.7")); err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, events); firstMember(ev.LoadBalancer) != "10.0.0.7" {
		t.Fatalf("the watch got members %q, want 10.0.0.7", firstMember(ev.LoadBalancer))
	}
	if got := firstMember(inFile(t, s, "a")); got == "10.0.0.7" {
		t.Fatal("the file holds the member change before any write or flush took it")
	}
	if got, err := s.Get(ctx, "a"); err != nil || firstMember(got) != "10.0.0.7" {
		t.Fatalf("Get: %q, %v; want 10.0.0.7", firstMember(got), err)
	}
	if list, err := s.List(ctx); err != nil || len(list) != 1 || firstMember(list[0]) != "10.0.0.7" {
		t.Fatalf("List: %v; want a with 10.0.0.7", err)
	}
	replay, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := nextEvent(t, replay); firstMember(ev.LoadBalancer) != "10.0.0.7" {
		t.Fatalf("a new watch replayed members %q, want 10.0.0.7", firstMember(ev.LoadBalancer))
	}

	report := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h"}
	if err := s.PutNodeStatus(ctx, "a", report); err != nil {
		t.Fatal(err)
	}
	stored := inFile(t, s, "a")
	if r, _ := stored.Status.Report("node-a"); firstMember(stored) != "10.0.0.7" || !r.Equal(report) {
		t.Fatalf("after a report the file holds members %q and report %+v; want both changes", firstMember(stored), r)
	}
	if len(s.pending) != 0 {
		t.Fatalf("%d changes still pending after a write", len(s.pending))
	}

	// Pending at Close: written then.
	if err := s.PutMembers(ctx, withMember(lb, "10.0.0.8")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path)
	if got, err := s.Get(ctx, "a"); err != nil || firstMember(got) != "10.0.0.8" {
		t.Fatalf("after Close and Open: members %q, %v; want 10.0.0.8", firstMember(got), err)
	}
}

// TestPutMembersFlushes: the flusher writes a pending change soon after,
// with no other write.
func TestPutMembersFlushes(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "pier.db"))
	ctx := t.Context()
	lb := storetest.Sample("a")
	if err := s.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMembers(ctx, withMember(lb, "10.0.0.7")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for firstMember(inFile(t, s, "a")) != "10.0.0.7" {
		if time.Now().After(deadline) {
			t.Fatal("the flusher did not write the member change within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPutMembersDurableOtherwise: PutMembers of anything but members (an
// address, a new load balancer) is PutSpec's durable write; a pending
// member change then deleted is gone from the file too.
func TestPutMembersDurableOtherwise(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "pier.db"))
	ctx := t.Context()
	holdFlusher(s)
	lb := storetest.Sample("a")
	if err := s.PutMembers(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if inFile(t, s, "a") == nil || len(s.pending) != 0 {
		t.Fatalf("a new load balancer through PutMembers: in the file %v, pending %d; want written", inFile(t, s, "a") != nil, len(s.pending))
	}
	moved := withMember(lb, "10.0.0.7")
	moved.VIP = "127.10.0.9"
	if err := s.PutMembers(ctx, moved); err != nil {
		t.Fatal(err)
	}
	if got := inFile(t, s, "a"); got.VIP != "127.10.0.9" || firstMember(got) != "10.0.0.7" || len(s.pending) != 0 {
		t.Fatalf("a new VIP with new members through PutMembers: the file holds %s and %q, pending %d; want written", got.VIP, firstMember(got), len(s.pending))
	}
	if err := s.PutMembers(ctx, withMember(moved, "10.0.0.8")); err != nil {
		t.Fatal(err)
	}
	if len(s.pending) != 1 {
		t.Fatalf("a member change: %d pending, want 1", len(s.pending))
	}
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if inFile(t, s, "a") != nil || len(s.pending) != 0 {
		t.Fatal("a deleted load balancer is still in the file or pending")
	}
	if _, err := s.Get(ctx, "a"); err == nil {
		t.Fatal("Get found a deleted load balancer")
	}
}
