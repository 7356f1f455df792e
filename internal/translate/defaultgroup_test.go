package translate

import (
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// TestDefaultGroup: with DefaultGroup every Ingress that names no group,
// whatever its namespace, is one load balancer, and so is one that names
// that group; one naming another group keeps its own. Without it each
// Ingress is its own load balancer.
func TestDefaultGroup(t *testing.T) {
	a := simpleIngress(t, "team-a", "web", 2, nil, "a.example", "/")
	b := simpleIngress(t, "team-b", "api", 1, nil, "b.example", "/")
	named := simpleIngress(t, "team-c", "named", 0, map[string]string{annotation.LoadBalancer: "class"}, "c.example", "/")
	own := simpleIngress(t, "team-c", "own", 0, map[string]string{annotation.LoadBalancer: "mine"}, "d.example", "/")
	snap := snapshotOf(a, b, named, own)

	uuidOf := func(res *Result, ns, name string) string {
		t.Helper()
		uuid, ok := res.Accepted[model.IngressRef(ns, name)]
		if !ok {
			t.Fatalf("%s/%s not accepted: %+v", ns, name, res.Problems)
		}
		return uuid
	}
	res := Ingresses(snap, DefaultOptions())
	if uuidOf(res, "team-a", "web") == uuidOf(res, "team-b", "api") {
		t.Fatal("without DefaultGroup two Ingresses share a load balancer")
	}

	opts := DefaultOptions()
	opts.DefaultGroup = "class"
	res = Ingresses(snap, opts)
	shared := uuidOf(res, "team-a", "web")
	if got := uuidOf(res, "team-b", "api"); got != shared {
		t.Fatalf("team-b/api is in %s, team-a/web in %s: want one load balancer", got, shared)
	}
	if got := uuidOf(res, "team-c", "named"); got != shared {
		t.Fatalf("an Ingress naming the default group is in %s, want %s", got, shared)
	}
	if got := uuidOf(res, "team-c", "own"); got == shared {
		t.Fatal("an Ingress naming another group joined the default one")
	}
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.UUID == shared {
			lb = l
		}
	}
	if lb == nil || lb.Name != "group:class" || len(lb.Sources) != 3 {
		t.Fatalf("shared load balancer %+v, want group:class with 3 sources", lb)
	}
}
