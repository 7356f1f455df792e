package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	sourcekube "pier.dev/pier/internal/source/kube"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// The heartbeat creates its Lease, renews it, recreates it when someone
// deleted it, and the peers' view (leaseHeartbeats) follows.
func TestHeartbeatLease(t *testing.T) {
	ctx := t.Context()
	client := fake.NewClientset()
	cfg := AgentConfig{Node: "a", LeaseNamespace: "pier-system", HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: 2 * time.Second}
	written := time.Date(2026, 11, 27, 4, 0, 0, 123456789, time.UTC)
	hb := newHeartbeat(client, cfg, func() time.Time { return written }, quiet)
	leases := client.CoordinationV1().Leases("pier-system")
	renewTime := func() time.Time {
		t.Helper()
		l, err := leases.Get(ctx, "pier-agent-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if *l.Spec.HolderIdentity != "a" || *l.Spec.LeaseDurationSeconds != 2 || l.Labels[sourcekube.LabelHeartbeat] == "" {
			t.Fatalf("lease spec %+v labels %v, want holder a, 2 s, the heartbeat label", l.Spec, l.Labels)
		}
		return l.Spec.RenewTime.Time
	}
	hb.renew(ctx)
	first := renewTime()
	time.Sleep(10 * time.Millisecond)
	hb.renew(ctx)
	if second := renewTime(); !second.After(first) {
		t.Errorf("renew time %s not after %s", second, first)
	}
	if err := leases.Delete(ctx, "pier-agent-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	hb.renew(ctx) // fails: the Lease it knew is gone
	hb.renew(ctx)
	renewTime()

	stop, cancel := context.WithCancel(ctx)
	peers, err := startLeaseHeartbeats(ctx, stop, client, "pier-system")
	if err != nil {
		t.Fatal(err)
	}
	// The informer's goroutines must be gone when the test ends: klog's
	// global logger is replaced by another test of this package.
	defer func() { cancel(); peers.factory.Shutdown() }()
	if !peers.Alive("a") || peers.Alive("b") {
		t.Errorf("Alive(a)=%v Alive(b)=%v, want a alive, b unknown", peers.Alive("a"), peers.Alive("b"))
	}
	if got := peers.ReportsWrittenAt("a"); !got.Equal(written) || !peers.ReportsWrittenAt("b").IsZero() {
		t.Errorf("ReportsWrittenAt(a)=%s, want %s (to the nanosecond); ReportsWrittenAt(b)=%s, want zero",
			got, written, peers.ReportsWrittenAt("b"))
	}
	hb.remove()
	deadline := time.Now().Add(5 * time.Second)
	for peers.Alive("a") {
		if time.Now().After(deadline) {
			t.Fatal("a still alive 5 s after its Lease was deleted")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAgentConfigValidate(t *testing.T) {
	ok := AgentConfig{Node: "a", LeaseNamespace: "pier-system", HeartbeatInterval: 2 * time.Second, HeartbeatTimeout: 10 * time.Second}
	if err := ok.validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	bad := ok
	bad.HeartbeatTimeout = bad.HeartbeatInterval
	if err := bad.validate(); err == nil {
		t.Error("a timeout no longer than the interval was accepted")
	}
	bad = ok
	bad.Node = ""
	if err := bad.validate(); err == nil {
		t.Error("no node was accepted")
	}
}
