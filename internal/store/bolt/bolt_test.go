package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "pier.db"))
	})
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "pier.db")
	s := open(t, path)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if err := s.PutSpec(ctx, storetest.Sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	report := model.NodeStatus{Node: "node-a", State: model.StateActive, SpecHash: "h"}
	if err := s.PutNodeStatus(ctx, "b", report); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path)
	lbs, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lbs) != 2 || lbs[0].UUID != "a" || lbs[1].UUID != "b" {
		t.Fatalf("after reopen List = %v, want a and b", lbs)
	}
	if r, _ := lbs[1].Status.Report("node-a"); !r.Equal(report) || lbs[1].Status.SpecHash != "h" || lbs[1].VIP != "127.10.0.1" || len(lbs[1].Pools[0].Members) != 1 {
		t.Fatalf("after reopen b = %+v", lbs[1])
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := info.Mode().Perm(); mode != 0o600 {
		t.Fatalf("state file mode = %v, want 0600", mode)
	}
}

func TestSecondOpenFailsFast(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pier.db")
	first := open(t, path)

	start := time.Now()
	_, err := Open(path)
	if err == nil {
		t.Fatal("second Open of the same state file succeeded")
	}
	if elapsed := time.Since(start); elapsed > 3*lockTimeout {
		t.Fatalf("second Open took %s, want about %s", elapsed, lockTimeout)
	}
	if !errors.Is(err, ErrInUse) {
		t.Fatalf("error %v is not ErrInUse", err)
	}
	if want := "state dir " + dir + " is in use by another pier"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	open(t, path) // the lock is released on Close
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pier.db")
	s := open(t, path)
	s.Close()

	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if got := string(meta.Get(keySchema)); got != SchemaVersion {
			return fmt.Errorf("schema = %q, want %q", got, SchemaVersion)
		}
		return meta.Put(keySchema, []byte("99"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}

	_, err = Open(path)
	if err == nil || !strings.Contains(err.Error(), `schema version "99"`) {
		t.Fatalf("Open of a newer schema: error = %v, want one naming schema version 99", err)
	}
}

// The conformance suite allows coalescing; the bolt store promises it, so
// a reader that wakes up after many writes gets about one event.
func TestSlowReaderCoalesces(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "pier.db"))
	ch, err := s.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	const writes = 300
	for i := range writes {
		lb := storetest.Sample("x")
		lb.Name = fmt.Sprint(i)
		if err := s.PutSpec(t.Context(), lb); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(t.Context(), "x"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		ev := storetest.Next(t, ch)
		got = append(got, string(ev.Type)+" "+ev.LoadBalancer.Name)
		if ev.Type == store.EventDelete {
			break
		}
	}
	// The watcher may have taken one PUT before the reader stalled.
	if len(got) > 2 || got[len(got)-1] != "DELETE 299" {
		t.Fatalf("events = %v, want at most one PUT then DELETE 299", got)
	}
}

func TestCloseEndsWatches(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "pier.db"))
	ch, err := s.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-ch:
		if ok {
			t.Fatal("event after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watch channel still open after Close")
	}
	if _, err := s.Watch(context.Background()); err == nil {
		t.Fatal("Watch after Close succeeded")
	}
	if err := s.PutSpec(context.Background(), storetest.Sample("a")); err == nil {
		t.Fatal("PutSpec after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestPutNodeStatuses: many reports in one write land as PutNodeStatus
// would land them one by one, a UUID without a load balancer is named,
// watchers hear each change, and a report that changes nothing is no
// event.
func TestPutNodeStatuses(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "pier.db"))
	ctx := t.Context()
	for _, id := range []string{"a", "b", "c"} {
		if err := s.PutSpec(ctx, storetest.Sample(id)); err != nil {
			t.Fatal(err)
		}
	}
	node := storetest.Sample("a").Placement.Active
	same := model.NodeStatus{Node: node, State: model.StateActive, SpecHash: "c1"}
	if err := s.PutNodeStatus(ctx, "c", same); err != nil {
		t.Fatal(err)
	}
	events, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 { // the replay
		<-events
	}
	reports := map[string]model.NodeStatus{
		"a":    {Node: node, State: model.StateActive, SpecHash: "a1"},
		"b":    {Node: node, State: model.StateError, Message: "refused"},
		"c":    same,
		"gone": {Node: node, State: model.StateActive},
	}
	missing, err := s.PutNodeStatuses(ctx, reports)
	if err != nil {
		t.Fatal(err)
	}
	if len(missing) != 1 || missing[0] != "gone" {
		t.Fatalf("missing %v, want [gone]", missing)
	}
	for _, id := range []string{"a", "b"} {
		ev := <-events
		if ev.LoadBalancer.UUID != id {
			t.Fatalf("event for %s, want %s", ev.LoadBalancer.UUID, id)
		}
		got, _ := ev.LoadBalancer.Status.Report(node)
		if !got.Equal(reports[id]) {
			t.Fatalf("%s reported %+v, want %+v", id, got, reports[id])
		}
	}
	select {
	case ev := <-events:
		t.Fatalf("unexpected event for %s: its report did not change", ev.LoadBalancer.UUID)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestMirror(t *testing.T) {
	storetest.RunMirror(t, func(t *testing.T) store.Store {
		return open(t, filepath.Join(t.TempDir(), "pier.db"))
	})
}
