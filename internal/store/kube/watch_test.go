package kube

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
)

// recorder is a slog handler that keeps messages (to tell a resumed watch
// from a re-listed one) and passes them on to the test log.
type recorder struct {
	slog.Handler
	mu   *sync.Mutex
	msgs *[]string
}

func newRecorder(t *testing.T) (*slog.Logger, func(substr string) int) {
	r := recorder{
		Handler: slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}),
		mu:      &sync.Mutex{}, msgs: &[]string{},
	}
	count := func(substr string) int {
		r.mu.Lock()
		defer r.mu.Unlock()
		n := 0
		for _, m := range *r.msgs {
			if strings.Contains(m, substr) {
				n++
			}
		}
		return n
	}
	return slog.New(r), count
}

func (r recorder) Handle(ctx context.Context, rec slog.Record) error {
	r.mu.Lock()
	*r.msgs = append(*r.msgs, rec.Message)
	r.mu.Unlock()
	return r.Handler.Handle(ctx, rec)
}

func (r recorder) WithAttrs(as []slog.Attr) slog.Handler {
	return recorder{Handler: r.Handler.WithAttrs(as), mu: r.mu, msgs: r.msgs}
}

// missedWhileAway writes, through another client, the three kinds of change
// a disconnected watcher can miss: a create, an update and a delete.
func missedWhileAway(t *testing.T, other *Store) {
	t.Helper()
	ctx := t.Context()
	if err := other.PutSpec(ctx, storetest.Sample("created")); err != nil {
		t.Fatal(err)
	}
	if err := other.PutNodeStatus(ctx, "changed", model.NodeStatus{Node: "node-a", State: model.StateActive}); err != nil {
		t.Fatal(err)
	}
	if err := other.Delete(ctx, "deleted"); err != nil {
		t.Fatal(err)
	}
}

// expectMissed reads events until it has seen what missedWhileAway did, in
// whatever order the watch delivers them, and fails on anything else.
func expectMissed(t *testing.T, ch <-chan store.Event) {
	t.Helper()
	want := map[string]bool{"PUT created": true, "PUT changed ACTIVE": true, "DELETE deleted": true}
	for len(want) > 0 {
		ev := storetest.Next(t, ch)
		key := string(ev.Type) + " " + ev.LoadBalancer.UUID
		if ev.LoadBalancer.UUID == "changed" {
			key += " " + string(ev.LoadBalancer.Status.State)
		}
		if !want[key] {
			t.Fatalf("unexpected event %s", key)
		}
		delete(want, key)
		if ev.Type == store.EventDelete && ev.LoadBalancer.Name != "default/deleted" {
			t.Fatalf("DELETE carries %q, want the last value (name default/deleted)", ev.LoadBalancer.Name)
		}
	}
}

// setupAway creates the objects missedWhileAway changes, starts a watch on
// a store behind a proxy, and reads its replay.
func setupAway(t *testing.T) (watched, direct *Store, ch <-chan store.Event, cut, restore func(), count func(string) int) {
	t.Helper()
	srv := cluster(t)
	proxy := srv.NewProxy(t)
	log, count := newRecorder(t)
	watched = newStore(t, proxy.Config(srv.Config()), log)
	direct = newStore(t, nil, nil)
	for _, id := range []string{"changed", "deleted"} {
		if err := direct.PutSpec(t.Context(), storetest.Sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := watched.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		storetest.Next(t, ch) // the replay
	}
	return watched, direct, ch, proxy.Cut, proxy.Restore, count
}

// TestWatchResumesAfterDisconnect: the watcher's connection drops while
// others write; it re-watches from its resourceVersion (the API server still
// has those events) and delivers every change, without a re-list.
func TestWatchResumesAfterDisconnect(t *testing.T) {
	_, direct, ch, cut, restore, count := setupAway(t)
	cut()
	missedWhileAway(t, direct)
	time.Sleep(500 * time.Millisecond) // let the watcher notice and retry against the cut
	restore()
	expectMissed(t, ch)
	if n := count("re-listing"); n != 0 {
		t.Fatalf("watch re-listed %d times; want a resumed watch", n)
	}
}

// TestWatchRelistsAfterAPIServerRestart: the API server restarts while the
// watcher is away, so its resourceVersion predates the new watch cache and
// the re-watch is refused with 410 Gone. The store re-lists and sends the
// difference, including a DELETE for the object that vanished unseen.
func TestWatchRelistsAfterAPIServerRestart(t *testing.T) {
	srv := cluster(t)
	_, direct, ch, cut, restore, count := setupAway(t)
	cut()
	missedWhileAway(t, direct)
	if err := srv.RestartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	restore()
	expectMissed(t, ch)
	if n := count("re-listing"); n == 0 {
		t.Fatal("no re-list logged; the test did not exercise the expired-watch path")
	}
	// The watch is live again after the re-list.
	if err := direct.PutSpec(t.Context(), storetest.Sample("after")); err != nil {
		t.Fatal(err)
	}
	if ev := storetest.Next(t, ch); ev.Type != store.EventPut || ev.LoadBalancer.UUID != "after" {
		t.Fatalf("after re-list got %s %s, want PUT after", ev.Type, ev.LoadBalancer.UUID)
	}
}

// TestWatchSurvivesAPIServerDown: the API server is down for a few seconds
// (every client loses it); the watch backs off, comes back and delivers the
// writes made after the restart.
func TestWatchSurvivesAPIServerDown(t *testing.T) {
	srv := cluster(t)
	s := newStore(t, nil, nil)
	ch, err := s.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	srv.StopAPIServer()
	time.Sleep(2 * time.Second)
	if err := srv.StartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSpec(t.Context(), storetest.Sample("back")); err != nil {
		t.Fatal(err)
	}
	if ev := storetest.Next(t, ch); ev.Type != store.EventPut || ev.LoadBalancer.UUID != "back" {
		t.Fatalf("got %s %s, want PUT back", ev.Type, ev.LoadBalancer.UUID)
	}
}
