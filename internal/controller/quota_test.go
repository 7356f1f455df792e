package controller

import (
	"context"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// A namespace at its cap gets no new load balancer or floating IP; other
// namespaces are not affected, and what exists keeps its addresses when
// the cap is lowered.
func TestQuota(t *testing.T) {
	r, _ := newReconciler(t, "10.0.0.0/24", "192.0.2.0/24")
	r.Quota = Quota{LoadBalancers: 2, PublicIPs: 1}
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	inNS := func(uuid, ns string, age int) *model.LoadBalancer {
		lb := lbFor(uuid, uuid, t0.Add(time.Duration(age)*time.Second), "")
		lb.Sources[0].Namespace = ns
		return lb
	}
	res := result(inNS("a1", "team-a", 0), inNS("a2", "team-a", 1), inNS("b1", "team-b", 2))
	applied, err := r.Apply(ctx, res, nodes)
	problems := applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	// team-a's second load balancer would take a second floating IP.
	if len(problems) != 1 || problems[0].Reason != "QuotaExceeded" || problems[0].Name != "a2" {
		t.Fatalf("problems %+v, want QuotaExceeded on a2 only", problems)
	}
	if _, ok := res.Without(applied.Refused).Accepted[model.ObjectRef{Kind: "Ingress", Namespace: "team-a", Name: "a2"}]; ok {
		t.Error("a2 still accepted")
	}
	got := map[string]bool{}
	for _, lb := range r.Index.List() {
		got[lb.UUID] = lb.FIP != ""
	}
	if len(got) != 2 || !got["a1"] || !got["b1"] {
		t.Fatalf("stored %v, want a1 and b1 with floating IPs", got)
	}

	// Without a public pool, the floating IP cap does not bite; the load
	// balancer cap does.
	r2, _ := newReconciler(t, "10.0.0.0/24", "")
	r2.Quota = Quota{LoadBalancers: 2, PublicIPs: 1}
	applied, err = r2.Apply(ctx, result(inNS("a1", "team-a", 0), inNS("a2", "team-a", 1), inNS("a3", "team-a", 2)), nodes)
	problems = applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Name != "a3" || problems[0].Reason != "QuotaExceeded" {
		t.Fatalf("problems %+v, want QuotaExceeded on a3 only", problems)
	}

	// A lower cap takes nothing from what exists.
	r.Quota = Quota{LoadBalancers: 1, PublicIPs: 0}
	applied, err = r.Apply(ctx, result(inNS("a1", "team-a", 0), inNS("b1", "team-b", 2)), nodes)
	problems = applied.Problems
	if err != nil || len(problems) != 0 {
		t.Fatalf("re-applying what exists under a lower cap: %v, %+v", err, problems)
	}
}
