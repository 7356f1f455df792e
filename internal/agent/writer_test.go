package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// flakyStore fails every status write while down.
type flakyStore struct {
	store.Store
	mu     sync.Mutex
	down   bool
	writes []model.NodeStatus
}

func (s *flakyStore) PutNodeStatus(_ context.Context, _ string, r model.NodeStatus) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errors.New("connection refused")
	}
	s.writes = append(s.writes, r)
	return nil
}

// TestWriterWrittenAt: the time the heartbeat carries as "reports written
// through" stops while a report cannot be written, and passes the report
// once it is.
func TestWriterWrittenAt(t *testing.T) {
	st := &flakyStore{}
	w := newStatusWriter(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := t.Context()
	if !w.writtenAt().IsZero() {
		t.Fatal("written through a time before any pass")
	}
	w.writeAll(ctx)
	idle := w.writtenAt()
	if idle.IsZero() {
		t.Fatal("a pass with nothing to write did not move the time")
	}

	st.down = true
	backup := model.NodeStatus{Node: "n0", VRRP: model.VRRPBackup, UpdatedAt: time.Now()}
	w.put("u1", backup)
	for range 3 {
		w.writeAll(ctx)
	}
	if got := w.writtenAt(); !got.Equal(idle) {
		t.Fatalf("written through %s while the report of %s could not be written, want it to stay %s",
			got, backup.UpdatedAt, idle)
	}

	st.down = false
	w.writeAll(ctx)
	if got := w.writtenAt(); !got.After(backup.UpdatedAt) {
		t.Fatalf("written through %s after the report of %s was written, want later", got, backup.UpdatedAt)
	}
	if len(st.writes) != 1 || !st.writes[0].Equal(backup) {
		t.Fatalf("store got %+v, want the one report", st.writes)
	}
}

// paceStore writes one report at a time, each taking delay (an API
// request at a client's rate), and fails every write from the failAt-th
// on while failAt is set.
type paceStore struct {
	store.Store
	delay time.Duration

	mu     sync.Mutex
	failAt int
	writes map[string]int // per UUID
	total  int
}

func (s *paceStore) PutNodeStatus(ctx context.Context, uuid string, _ model.NodeStatus) error {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAt > 0 && s.total+1 >= s.failAt {
		return errors.New("connection refused")
	}
	s.total++
	s.writes[uuid]++
	return nil
}

func pendingReports(w *statusWriter, n int) {
	for i := range n {
		w.put(fmt.Sprintf("u%03d", i), model.NodeStatus{Node: "n0", State: model.StateActive, UpdatedAt: time.Now()})
	}
}

// TestWriterPassLongerThanTimeout: a node's cold start queues more
// reports than one write timeout can carry to a store that writes them
// one by one; one pass still writes every one of them, each once.
func TestWriterPassLongerThanTimeout(t *testing.T) {
	st := &paceStore{delay: 5 * time.Millisecond, writes: map[string]int{}}
	w := newStatusWriter(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.timeout = 50 * time.Millisecond // ten writes' worth
	pendingReports(w, 60)
	w.writeAll(t.Context())
	if len(w.pending) != 0 || len(st.writes) != 60 || st.total != 60 {
		t.Fatalf("after one pass: %d reports still pending, %d of 60 load balancers written in %d writes, want 0, 60 and 60",
			len(w.pending), len(st.writes), st.total)
	}
}

// TestWriterKeepsWhatWasWritten: a pass that fails part-way leaves
// pending only what it did not write, so the next pass goes on from
// there instead of writing the first reports again.
func TestWriterKeepsWhatWasWritten(t *testing.T) {
	st := &paceStore{writes: map[string]int{}, failAt: 21}
	w := newStatusWriter(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	pendingReports(w, 50)
	w.writeAll(t.Context())
	if len(w.pending) != 30 {
		t.Fatalf("after a pass that failed at the 21st write: %d reports pending, want 30", len(w.pending))
	}
	st.mu.Lock()
	st.failAt = 0
	st.mu.Unlock()
	w.writeAll(t.Context())
	if len(w.pending) != 0 || st.total != 50 {
		t.Fatalf("after the next pass: %d pending and %d writes, want 0 and 50 (each report once)", len(w.pending), st.total)
	}
	for uuid, n := range st.writes {
		if n != 1 {
			t.Errorf("%s written %d times, want once", uuid, n)
		}
	}
}
