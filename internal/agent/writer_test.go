package agent

import (
	"context"
	"errors"
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
	if len(st.writes) != 1 || st.writes[0] != backup {
		t.Fatalf("store got %+v, want the one report", st.writes)
	}
}
