package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/translate"
)

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
	res := Translate(snap, opts)

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
	if c := accepted("attacker", "r4"); c.Status != metav1.ConditionFalse || c.Reason != translate.ReasonQuotaExceeded ||
		!strings.Contains(c.Message, "--max-httproutes-per-namespace") {
		t.Errorf("r4: %+v, want Accepted=False QuotaExceeded naming the flag", c)
	}
	if c := accepted("victim", "site"); c.Status != metav1.ConditionTrue {
		t.Errorf("the victim's route on its own Gateway: %+v", c)
	}
	g2 := findCondition(t, res.Gateway.Gateways[gatewayRef("attacker", "g2")].Conditions, string(gwv1.GatewayConditionAccepted))
	if g2.Status != metav1.ConditionFalse || g2.Reason != translate.ReasonQuotaExceeded || !strings.Contains(g2.Message, "--max-gateways-per-namespace") {
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
