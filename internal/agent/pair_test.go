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

// TestContested: the standby steps down only for the active node's word
// from after its own MASTER report. RELIABILITY F4b: an active node back
// from an API outage renews its heartbeat before its reports follow; its
// old MASTER report must not fence the standby that took over meanwhile.
func TestContested(t *testing.T) {
	reported := time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)
	split := claim{role: model.VRRPMaster, heldFor: 5 * time.Second, myReport: reported,
		peerMaster: true, peerAlive: true, peerWritten: reported.Add(time.Second)}
	if !split.contested() {
		t.Fatalf("%+v: a split brain, not contested", split)
	}
	for _, tc := range []struct {
		name   string
		change func(*claim)
	}{
		{"the peer's reports written only up to before this node's MASTER report (back from an outage)",
			func(c *claim) { c.peerWritten = reported.Add(-time.Millisecond) }},
		{"the peer's reports written up to exactly this node's report", func(c *claim) { c.peerWritten = reported }},
		{"no word from the peer on its reports (an agent that predates it)", func(c *claim) { c.peerWritten = time.Time{} }},
		{"the peer's heartbeat expired", func(c *claim) { c.peerAlive = false }},
		{"the peer does not say MASTER", func(c *claim) { c.peerMaster = false }},
		{"this node's MASTER report never reached the store", func(c *claim) { c.myReport = time.Time{} }},
		{"this node is BACKUP", func(c *claim) { c.role = model.VRRPBackup }},
		{"this node is MASTER for less than the grace", func(c *claim) { c.heldFor = fenceGrace - time.Millisecond }},
	} {
		c := split
		tc.change(&c)
		if c.contested() {
			t.Errorf("%s: %+v contested, want not", tc.name, c)
		}
	}
}

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
