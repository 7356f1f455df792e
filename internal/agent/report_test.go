package agent

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// TestHealLostReports: a report that is not pending, was queued long
// enough ago and is not in the newest watched copy of its object is
// written again; one the copy holds, one queued just now, one still
// pending and one for a load balancer no longer placed here are not.
func TestHealLostReports(t *testing.T) {
	const uuid = "0f8a2d3e-1111-4222-8333-444455556666"
	now := time.Date(2026, 12, 2, 23, 0, 0, 0, time.UTC)
	last := model.NodeStatus{Node: "n1", State: model.StateActive, SpecHash: "s1", ConfigHash: "c1"}
	placed := model.Placement{Active: "n1", Standby: "n2"}
	other := model.NodeStatus{Node: "n2", State: model.StateActive, SpecHash: "s1", ConfigHash: "c2"}
	cases := []struct {
		name      string
		stored    []model.NodeStatus
		placement model.Placement
		queuedAgo time.Duration
		pending   bool
		rewritten bool
	}{
		{name: "missing from the object", stored: []model.NodeStatus{other}, placement: placed, queuedAgo: time.Minute, rewritten: true},
		{name: "an older report of this node stored", stored: []model.NodeStatus{{Node: "n1", State: model.StatePending}, other},
			placement: placed, queuedAgo: time.Minute, rewritten: true},
		{name: "held, stats aside", stored: []model.NodeStatus{{Node: "n1", State: model.StateActive, SpecHash: "s1", ConfigHash: "c1", Members: 3}, other},
			placement: placed, queuedAgo: time.Minute},
		{name: "queued just now: the watch may not have brought it back", stored: []model.NodeStatus{other}, placement: placed,
			queuedAgo: time.Second},
		{name: "still pending", stored: []model.NodeStatus{other}, placement: placed, queuedAgo: time.Minute, pending: true},
		{name: "no longer placed here", stored: []model.NodeStatus{other}, placement: model.Placement{Active: "n2", Standby: "n3"},
			queuedAgo: time.Minute},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := New(Config{Node: "n1", Drivers: []driver.Driver{&fakeDriver{provider: model.ProviderHAProxy}},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			lb := &model.LoadBalancer{UUID: uuid, Name: "ns/a", Placement: c.placement,
				Status: model.Status{Nodes: c.stored}.Summarize(c.placement)}
			a.latest[uuid] = lb
			a.applied[uuid] = lb
			a.reported[uuid] = last
			a.reportedAt[uuid] = now.Add(-c.queuedAgo)
			a.lastReport[uuid] = model.NodeStatus{State: last.State, ConfigHash: last.ConfigHash}
			if c.pending {
				a.writer.put(uuid, last)
			}
			a.healLostReports(t.Context(), now)
			got := a.writer.has(uuid) && !c.pending
			if got != c.rewritten {
				t.Fatalf("rewritten = %v, want %v", got, c.rewritten)
			}
			if c.rewritten {
				a.writer.mu.Lock()
				r := a.writer.pending[uuid]
				a.writer.mu.Unlock()
				if r.Node != "n1" || r.State != model.StateActive || r.ConfigHash != "c1" {
					t.Fatalf("rewritten report %+v, want n1 ACTIVE c1", r)
				}
			}
		})
	}
}
