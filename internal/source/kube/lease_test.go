package kube

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"pier.dev/pier/internal/source"
)

const leaseNS = "pier-system"

func TestLeaseAlive(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh := NewAgentLease(leaseNS, "a", 10*time.Second, now.Add(-9*time.Second))
	stale := NewAgentLease(leaseNS, "a", 10*time.Second, now.Add(-10*time.Second))
	foreign := NewAgentLease(leaseNS, "a", 10*time.Second, now)
	foreign.Name = "pier-controller"
	noRenew := NewAgentLease(leaseNS, "a", 10*time.Second, now)
	noRenew.Spec.RenewTime = nil
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"renewed within its duration", fresh, true},
		{"renewed a duration ago", stale, false},
		{"name does not match the holder", foreign, false},
		{"never renewed", noRenew, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LeaseAlive(tt.lease, now); got != tt.want {
				t.Errorf("LeaseAlive = %v, want %v", got, tt.want)
			}
		})
	}
	lv := livenessAt([]*coordinationv1.Lease{fresh, stale, NewAgentLease(leaseNS, "b", 2*time.Second, now)}, now)
	if !lv.alive["a"] || !lv.alive["b"] || len(lv.alive) != 2 || !lv.next.Equal(now.Add(time.Second)) {
		t.Errorf("liveness %+v, want a and b alive, next change at a's expiry in 1s", lv)
	}
}

// A sub-second duration rounds up to the 1 s the Lease can express.
func TestLeaseDurationRoundsUp(t *testing.T) {
	l := NewAgentLease(leaseNS, "a", 1500*time.Millisecond, time.Now())
	if *l.Spec.LeaseDurationSeconds != 2 {
		t.Errorf("leaseDurationSeconds %d, want 2", *l.Spec.LeaseDurationSeconds)
	}
}

func readyNode(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

// The source emits a snapshot when a node's Lease expired and another
// agent renewed since (proof that renewals get through, see
// TestExpiryHeldUntilProven), when it is renewed after being stale and
// when the node is cordoned, and none for a renewal that keeps it fresh.
func TestSourceFollowsAgentLeases(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Second, time.Now()),
		NewAgentLease(leaseNS, "b", time.Hour, time.Now()))
	src := New(client, Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	snaps := make(chan source.Node, 10)
	go func() {
		_ = src.Run(ctx, func(s *source.Snapshot) {
			if len(s.Nodes) == 1 {
				snaps <- s.Nodes[0]
			}
		})
	}()
	// expect waits for a snapshot in the wanted state; the informers'
	// initial adds may repeat the previous one first.
	expect := func(what string, within time.Duration, ready, draining bool) {
		t.Helper()
		deadline := time.After(within)
		for {
			select {
			case n := <-snaps:
				if n.Ready == ready && n.Draining == draining {
					return
				}
			case <-deadline:
				t.Fatalf("%s: no snapshot with ready %v, draining %v within %s", what, ready, draining, within)
			}
		}
	}
	leases := client.CoordinationV1().Leases(leaseNS)
	renewNode := func(node string, d time.Duration) {
		t.Helper()
		l, err := leases.Get(ctx, AgentLeaseName(node), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		RenewAgentLease(l, node, d, time.Now())
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	renew := func() { t.Helper(); renewNode("a", time.Second) }
	expect("start", 5*time.Second, true, false)
	time.Sleep(1200 * time.Millisecond) // a's Lease expires: held, no renewal since
	for len(snaps) > 0 {
		if n := <-snaps; !n.Ready {
			t.Fatalf("node %+v given up before any agent renewed after its expiry", n)
		}
	}
	renewNode("b", time.Hour)
	expect("lease expired, b renewed since", 2*time.Second, false, false)
	renew()
	expect("renewed after being stale", time.Second, true, false)
	time.Sleep(100 * time.Millisecond)
	for len(snaps) > 0 {
		<-snaps
	}
	renew()
	select {
	case n := <-snaps:
		t.Fatalf("snapshot %+v after a renewal of a fresh lease", n)
	case <-time.After(300 * time.Millisecond):
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "a", metav1.GetOptions{})
	node.Spec.Unschedulable = true
	node.ResourceVersion = "2"
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	renew() // keep the node ready while the cordon is seen
	expect("cordoned", time.Second, true, true)
}
