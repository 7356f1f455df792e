package agent

import (
	"io"
	"log/slog"
	"testing"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
)

// TestECMPNodeWithFailedTableIsUnhealthy: a node of an ECMP placement
// whose newest table failed here serves the endpoints of before, a Maglev
// table its peers no longer have: the mover is told it is not healthy, so
// it withdraws its routes. A spec every node rejects changes no table and
// keeps the node in. A pair's node keeps serving its previous config (a
// failed apply leaves the last good one running).
func TestECMPNodeWithFailedTableIsUnhealthy(t *testing.T) {
	a := New(Config{Node: "n1", Drivers: []driver.Driver{&fakeDriver{provider: model.ProviderNative}}, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	const uuid = "eeee0000-0000-4000-8000-000000000001"
	lb := &model.LoadBalancer{UUID: uuid, Name: "ns/svc", Provider: model.ProviderNative, VIP: "10.0.0.1",
		Placement: model.Placement{Active: "n1", Standby: "n2", ECMP: []string{"n1", "n2", "n3"}}}
	a.held[uuid], a.applied[uuid] = model.ProviderNative, lb
	if !a.healthy(uuid) {
		t.Fatal("an applied ECMP load balancer is not healthy")
	}
	a.failed[uuid] = "the hash of a newer spec"
	if !a.healthy(uuid) {
		t.Fatal("a spec every node rejects took an ECMP node out: every table is still alike")
	}
	a.stale[uuid] = true
	if a.healthy(uuid) {
		t.Fatal("an ECMP node whose newest table failed still counts as healthy: it would keep attracting flows with another endpoint table")
	}
	pair := lb.Clone()
	pair.Placement.ECMP = nil
	a.applied[uuid] = pair
	if !a.healthy(uuid) {
		t.Fatal("a pair's node whose newest apply failed stopped serving its previous config")
	}
}
