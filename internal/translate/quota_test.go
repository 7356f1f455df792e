package translate

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

// A namespace past its quota of Ingresses has its newest refused with
// QuotaExceeded naming the flag; what it is refused does not count for
// --max-ingresses, so another namespace's Ingresses are still served.
func TestIngressesPerNamespace(t *testing.T) {
	var ings = []struct{ ns, name string }{
		{"attacker", "a1"}, {"attacker", "a2"}, {"attacker", "a3"}, {"attacker", "a4"}, {"victim", "v1"}, {"victim", "v2"},
	}
	snap := snapshotOf()
	for i, x := range ings {
		ing := simpleIngress(t, x.ns, x.name, i, nil, x.name+".example", "/")
		snap.Ingresses = append(snap.Ingresses, ing)
		withBackends(snap, ing)
	}
	opts := DefaultOptions()
	opts.MaxIngresses, opts.MaxIngressesPerNamespace = 4, 2
	res := Ingresses(snap, opts)
	for _, x := range ings {
		_, ok := res.Accepted[model.IngressRef(x.ns, x.name)]
		if want := x.name != "a3" && x.name != "a4"; ok != want {
			t.Errorf("%s served: %v, want %v (%+v)", x.name, ok, want, problemsFor(res, x.name))
		}
	}
	for _, name := range []string{"a3", "a4"} {
		ps := problemsFor(res, name)
		if len(ps) != 1 || ps[0].Reason != ReasonQuotaExceeded || ps[0].Severity != model.SeverityError ||
			!strings.Contains(ps[0].Message, "--max-ingresses-per-namespace") {
			t.Errorf("%s: %+v, want one QuotaExceeded naming the flag", name, ps)
		}
	}
	// The global cap is still the last line.
	opts.MaxIngressesPerNamespace = 0
	res = Ingresses(snap, opts)
	if ps := problemsFor(res, "v1"); len(ps) != 1 || ps[0].Reason != "TooManyIngresses" {
		t.Errorf("without quota, v1: %+v, want TooManyIngresses", ps)
	}
}

// The defaults keep one namespace to a tenth of each global cap.
func TestDefaultQuotas(t *testing.T) {
	o := DefaultOptions()
	if o.MaxIngressesPerNamespace*10 != o.MaxIngresses || o.MaxHTTPRoutesPerNamespace*10 != o.MaxHTTPRoutes ||
		o.MaxGatewaysPerNamespace <= 0 || o.MaxRegexPathsPerNamespace <= 0 || o.MaxRegexPathsPerLoadBalancer <= 0 {
		t.Errorf("defaults %+v", o)
	}
}

// The routes of one namespace past its quota are refused (Accepted=False,
// QuotaExceeded), and do not take the global cap from another
// namespace's routes to that namespace's own Gateway; the newest
// Gateway of a namespace past its quota is not accepted and has no load
// balancer, its routes are not attached.
func TestHTTPRoutesAndGatewaysPerNamespace(t *testing.T) {
	docs := gatewayClassDoc
	for _, gw := range []struct{ ns, name string }{{"attacker", "g1"}, {"attacker", "g2"}, {"victim", "gw"}} {
		docs += "\n---\nkind: Gateway\nmetadata: {name: " + gw.name + ", namespace: " + gw.ns + "}\n" +
			"spec:\n  gatewayClassName: pier\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n"
	}
	for _, name := range []string{"r1", "r2", "r3", "r4"} {
		docs += attachRouteDoc("attacker", name, "{name: g1}", name+".example.com", "/")
	}
	docs += attachRouteDoc("attacker", "on-g2", "{name: g2}", "g2.example.com", "/")
	docs += attachRouteDoc("victim", "site", "{name: gw}", "victim.example.com", "/")
	snap := gatewaySnap(t, docs)
	withServices(snap, "attacker", "svc")
	withServices(snap, "victim", "svc")
	opts := gatewayOpts()
	opts.MaxHTTPRoutes, opts.MaxHTTPRoutesPerNamespace, opts.MaxGatewaysPerNamespace = 4, 3, 1
	res := Gateways(snap, opts)

	accepted := func(ns, name string) metav1.Condition {
		parents := res.Gateway.Routes[routeRef(ns, name)]
		if len(parents) != 1 {
			t.Fatalf("%s/%s: %d parent statuses", ns, name, len(parents))
		}
		return findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
	}
	for _, name := range []string{"r1", "r2", "r3"} {
		if c := accepted("attacker", name); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v", name, c)
		}
	}
	if c := accepted("attacker", "r4"); c.Status != metav1.ConditionFalse || c.Reason != ReasonQuotaExceeded ||
		!strings.Contains(c.Message, "--max-httproutes-per-namespace") {
		t.Errorf("r4: %+v, want Accepted=False QuotaExceeded naming the flag", c)
	}
	if c := accepted("victim", "site"); c.Status != metav1.ConditionTrue {
		t.Errorf("the victim's route on its own Gateway: %+v", c)
	}
	g2 := findCondition(t, res.Gateway.Gateways[gatewayRef("attacker", "g2")].Conditions, string(gwv1.GatewayConditionAccepted))
	if g2.Status != metav1.ConditionFalse || g2.Reason != ReasonQuotaExceeded || !strings.Contains(g2.Message, "--max-gateways-per-namespace") {
		t.Errorf("g2: %+v, want Accepted=False QuotaExceeded naming the flag", g2)
	}
	if _, ok := res.Accepted[gatewayRef("attacker", "g2")]; ok {
		t.Errorf("g2 has a load balancer")
	}
	if c := accepted("attacker", "on-g2"); c.Status != metav1.ConditionFalse {
		t.Errorf("the route on the refused Gateway: %+v", c)
	}
	if len(res.LoadBalancers) != 2 {
		t.Errorf("%d load balancers, want g1's and the victim's", len(res.LoadBalancers))
	}
}
