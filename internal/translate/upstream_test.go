package translate

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/annotation"
)

// service-upstream makes the ClusterIP the pool's one member, and
// proxy-next-upstream-tries sets its tries; both belong to the Service
// port's backend: the oldest Ingress's choice applies, a newer one that
// differs gets an UpstreamConflict warning.
func TestServiceUpstreamAndTries(t *testing.T) {
	older := simpleIngress(t, "ns", "older", 0, map[string]string{annotation.LoadBalancer: "g",
		annotation.NginxPrefix + "service-upstream": "true", annotation.NginxPrefix + "proxy-next-upstream-tries": "2"}, "a.example", "/")
	newer := simpleIngress(t, "ns", "newer", 1, map[string]string{annotation.LoadBalancer: "g"}, "b.example", "/")
	res := Ingresses(snapshotOf(older, newer), DefaultOptions())
	lb := onlyLB(t, res)
	if len(lb.Pools) != 1 {
		t.Fatalf("%d pools", len(lb.Pools))
	}
	p := lb.Pools[0]
	if !p.ServiceUpstream || p.Tries != 2 || len(p.Members) != 1 || p.Members[0].Address != "10.96.0.10" || p.Members[0].Target != "clusterIP" {
		t.Errorf("pool %+v", p)
	}
	ps := problemsFor(res, "newer")
	if len(ps) != 1 || ps[0].Reason != "UpstreamConflict" || !strings.Contains(ps[0].Message, "its ClusterIP, 2 tries") {
		t.Errorf("newer: %+v", ps)
	}
	if ps := problemsFor(res, "older"); len(ps) != 0 {
		t.Errorf("older: %+v", ps)
	}

	// Without annotations: endpoints, the defaults' retries.
	plain := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "plain", 0, nil, "a.example", "/")), DefaultOptions()))
	if p := plain.Pools[0]; p.ServiceUpstream || p.Tries != 0 || p.Members[0].Target == "clusterIP" {
		t.Errorf("plain pool %+v", p)
	}
	// Under --members-from-cluster-ip the annotation changes nothing.
	opts := DefaultOptions()
	opts.MembersFromClusterIP = true
	global := onlyLB(t, Ingresses(snapshotOf(simpleIngress(t, "ns", "g", 0,
		map[string]string{annotation.NginxPrefix + "service-upstream": "true"}, "a.example", "/")), opts))
	if p := global.Pools[0]; p.ServiceUpstream || p.Members[0].Target != "clusterIP" {
		t.Errorf("global pool %+v", p)
	}

}

// service-upstream to a headless Service has no member: a Warning says
// the route answers 503, rather than a silent empty pool.
func TestServiceUpstreamHeadless(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.NginxPrefix + "service-upstream": "true"}, "a.example", "/")
	snap := snapshotOf(ing)
	for _, svc := range snap.Services {
		svc.Spec.ClusterIP = "None"
	}
	res := Ingresses(snap, DefaultOptions())
	if p := onlyLB(t, res).Pools[0]; len(p.Members) != 0 {
		t.Errorf("members %+v", p.Members)
	}
	ps := problemsFor(res, "a")
	if len(ps) != 1 || ps[0].Reason != "NoClusterIP" || !strings.Contains(ps[0].Message, "503") {
		t.Errorf("problems %+v", ps)
	}
}
