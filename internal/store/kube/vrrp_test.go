package kube

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/storetest"
)

// TestVRRPRoleRoundTrip: each node's VRRP role survives the custom
// resource, the schema refuses a role outside MASTER/BACKUP/FAULT, and
// `kubectl get loadbalancers` shows which node reports which role.
func TestVRRPRoleRoundTrip(t *testing.T) {
	srv := cluster(t)
	s := newStore(t, nil, nil)
	ctx := t.Context()
	if err := s.PutSpec(ctx, storetest.Sample("vrrp")); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []model.NodeStatus{
		{Node: "node-a", State: model.StateActive, VRRP: model.VRRPMaster, UpdatedAt: at},
		{Node: "node-b", State: model.StateActive, VRRP: model.VRRPBackup, UpdatedAt: at},
	} {
		if err := s.PutNodeStatus(ctx, "vrrp", r); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx, "vrrp")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := got.Status.Report("node-a")
	b, _ := got.Status.Report("node-b")
	if a.VRRP != model.VRRPMaster || b.VRRP != model.VRRPBackup {
		t.Fatalf("reports read back %+v / %+v, want MASTER / BACKUP", a, b)
	}
	bad := model.NodeStatus{Node: "node-b", State: model.StateActive, VRRP: "PRIMARY", UpdatedAt: at}
	if err := s.PutNodeStatus(ctx, "vrrp", bad); err == nil {
		t.Error("a VRRP role outside the enum was stored")
	}
	row := tableRow(t, srv.Config(), "vrrp")
	if got, want := fmt.Sprint(row), "[vrrp haproxy 127.10.0.1 127.20.0.1 node-a node-b ACTIVE node-a node-b]"; got != want {
		t.Errorf("kubectl get row = %s, want %s", got, want)
	}
}

// tableRow returns the cells kubectl prints by default (priority 0, Age
// left out: it changes) for one load balancer.
func tableRow(t *testing.T, cfg *rest.Config, uuid string) []any {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cfg.Host+"/apis/pier.dev/v1alpha1/loadbalancers/"+uuid, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	var cells []any
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 && c.Name != "Age" {
			cells = append(cells, table.Rows[0].Cells[i])
		}
	}
	return cells
}
