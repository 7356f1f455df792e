package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// --max-httproutes refuses the newest routes of our Gateways past
// the cap, as --max-ingresses does Ingresses: Accepted=False with the
// reason, an Error problem, not counted in attachedRoutes, not served;
// a route of another controller's Gateway does not count.
func TestMaxHTTPRoutes(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
`
	docs += attachRouteDoc("default", "theirs", "{name: not-ours}", "", "/")
	for _, name := range []string{"oldest", "older", "newest"} {
		docs += attachRouteDoc("default", name, "{name: gw}", name+".example.com", "/")
	}
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	opts := gatewayOpts()
	opts.MaxHTTPRoutes = 2
	res := Translate(snap, opts)

	for _, name := range []string{"oldest", "older"} {
		c := findCondition(t, res.Gateway.Routes[routeRef("default", name)][0].Conditions, string(gwv1.RouteConditionAccepted))
		if c.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v", name, c)
		}
	}
	parents := res.Gateway.Routes[routeRef("default", "newest")]
	if len(parents) != 1 {
		t.Fatalf("newest: %d parent statuses", len(parents))
	}
	c := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
	if c.Status != metav1.ConditionFalse || c.Reason != reasonTooManyHTTPRoutes || !strings.Contains(c.Message, "--max-httproutes") {
		t.Errorf("newest: %+v", c)
	}
	var found bool
	for _, p := range res.Problems {
		if p.Name == "newest" && p.Reason == reasonTooManyHTTPRoutes && p.Severity == "Error" {
			found = true
		}
	}
	if !found {
		t.Errorf("no TooManyHTTPRoutes problem: %+v", res.Problems)
	}
	gw := res.Gateway.Gateways[gatewayRef("default", "gw")]
	if gw.Listeners[0].AttachedRoutes != 2 {
		t.Errorf("attachedRoutes %d, want 2 (the refused route is not attached)", gw.Listeners[0].AttachedRoutes)
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers", len(res.LoadBalancers))
	}
	for _, l := range res.LoadBalancers[0].Listeners {
		for _, p := range l.Policies {
			for _, r := range p.Rules {
				if strings.Contains(r.Value, "newest") {
					t.Errorf("the refused route is served: %+v", p)
				}
			}
		}
	}
}
