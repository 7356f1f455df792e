package kube

import (
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/storetest"
)

// TestStatusWriteFailsFastDuringOutage: while the API server is away,
// every status write fails at once, retries included. A failed round trip
// keeps the cached object, so a retry is one PUT; forgetting it would send
// the retry through a GET, which client-go repeats for up to 10 s (1 s
// apart) against a broken connection. The agent writes its reports from
// the loop that also runs the address holder, which must not stall.
func TestStatusWriteFailsFastDuringOutage(t *testing.T) {
	srv := cluster(t)
	proxy := srv.NewProxy(t)
	direct := newStore(t, nil, nil)
	agent := newStore(t, proxy.Config(srv.Config()), nil)
	lb := storetest.Sample("outage")
	if err := direct.PutSpec(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	node := lb.Placement.Active // a report from a node not placed is dropped
	report := model.NodeStatus{Node: node, State: model.StateActive, VRRP: model.VRRPMaster}
	if err := agent.PutNodeStatus(t.Context(), lb.UUID, report); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for i, role := range []model.VRRPState{model.VRRPFault, model.VRRPBackup, model.VRRPFault} {
		report.VRRP = role
		start := time.Now()
		err := agent.PutNodeStatus(t.Context(), lb.UUID, report)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("write %d succeeded during the outage", i)
		}
		if took > 500*time.Millisecond {
			t.Errorf("write %d failed after %s during the outage (%v), want at once", i, took, err)
		}
	}
	proxy.Restore()
	report.VRRP = model.VRRPBackup
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := agent.PutNodeStatus(t.Context(), lb.UUID, report)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status write after the restore: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got, err := direct.Get(t.Context(), lb.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := got.Status.Report(node); !ok || r.VRRP != model.VRRPBackup {
		t.Errorf("report after the restore: %+v, want %s BACKUP", got.Status.Nodes, node)
	}
}
