package kube

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/storetest"
)

// TestHealthAndHistoryRoundTrip: the per-node counts, the holder and the
// failover history survive the custom resource as the API server stores
// it (a field missing from the schema would be pruned silently), and a
// failover written as two reports appends to the history.
func TestHealthAndHistoryRoundTrip(t *testing.T) {
	srv := cluster(t)
	s := newStore(t, nil, nil)
	ctx := t.Context()
	if err := s.PutSpec(ctx, storetest.Sample("hist")); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(node string, role model.VRRPState, sec int) {
		t.Helper()
		r := model.NodeStatus{Node: node, State: model.StateActive, VRRP: role, Reloads: 3, RuntimeUpdates: 7,
			MembersUp: 1, Members: 2, UpdatedAt: at.Add(time.Duration(sec) * time.Second)}
		if err := s.PutNodeStatus(ctx, "hist", r); err != nil {
			t.Fatal(err)
		}
	}
	put("node-a", model.VRRPMaster, 1)
	put("node-b", model.VRRPBackup, 1)
	// node-a's adverts stop: node-b says MASTER before node-a says FAULT.
	// While both say MASTER the active node holds; the change is dated
	// by the report that ended it.
	put("node-b", model.VRRPMaster, 5)
	put("node-a", model.VRRPFault, 6)

	stored := storedStatus(t, srv.Config(), "hist")
	want := []model.HolderChange{{At: at.Add(time.Second), To: "node-a"}, {At: at.Add(6 * time.Second), From: "node-a", To: "node-b"}}
	if stored.Holder != "node-b" || !reflect.DeepEqual(stored.History, want) {
		t.Fatalf("stored holder %q, history %+v; want node-b, %+v", stored.Holder, stored.History, want)
	}
	for _, r := range stored.Nodes {
		if r.Reloads != 3 || r.RuntimeUpdates != 7 || r.MembersUp != 1 || r.Members != 2 {
			t.Errorf("stored report lost its counts: %+v", r)
		}
	}
	got, err := s.Get(ctx, "hist")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Holder != stored.Holder || !reflect.DeepEqual(got.Status.History, stored.History) {
		t.Fatalf("Get: holder %q, history %+v", got.Status.Holder, got.Status.History)
	}
}

// storedStatus reads the status of a load balancer straight from the API
// server, past the store's cache.
func storedStatus(t *testing.T, cfg *rest.Config, uuid string) model.Status {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+"/apis/pier.dev/v1alpha1/loadbalancers/"+uuid, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o struct {
		Status model.Status `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	return o.Status
}
