package gatewayapi

import (
	"bytes"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/translate"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
)

// hostPrecedenceDocs: on a listener for listenerHost, an older route for
// olderHosts with a longer prefix and a header match on its own prefix,
// and a newer route for newerHosts with a shorter one.
func hostPrecedenceDocs(listenerHost, olderHosts, newerHosts string) string {
	return gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP, hostname: "` + listenerHost + `"}
---
kind: HTTPRoute
metadata: {name: older}
spec:
  parentRefs: [{name: gw}]
  hostnames: ` + olderHosts + `
  rules:
  - matches: [{path: {value: /path/prefix}}]
    backendRefs: [{name: older, port: 80}]
  - matches: [{path: {value: /only-older}}]
    backendRefs: [{name: older, port: 80}]
---
kind: HTTPRoute
metadata: {name: newer}
spec:
  parentRefs: [{name: gw}]
  hostnames: ` + newerHosts + `
  rules:
  - matches: [{path: {value: /path}, headers: [{name: Header-A, value: A}]}]
    backendRefs: [{name: newer, port: 80}]
`
}

// Routes whose hostnames meet the listener's in one name are ordered by
// the hostname each wrote (the more specific first: the name itself,
// then a longer wildcard, then none) before their paths, whatever their
// age: the Gateway API's hostname intersection precedence.
func TestGatewayHostnameIntersectionPrecedence(t *testing.T) {
	a := map[string]string{"header-a": "A"}
	for _, tc := range []struct {
		name                               string
		listener, olderHosts, newerHosts   string
		host                               string
		wantWithHeader, wantWithout, wantO string
	}{
		{"exact over wildcard", "abc.example.com", `["*.example.com"]`, `[abc.example.com]`, "abc.example.com", "newer", "older", "older"},
		{"longer wildcard over shorter", "*.example.com", `["*.com"]`, `["*.example.com"]`, "abc.example.com", "newer", "older", "older"},
		{"a hostname over none", "abc.example.com", `[]`, `["*.example.com"]`, "abc.example.com", "newer", "older", "older"},
		// Both wrote the listener's name: the longer path wins, as ever.
		{"one name: path decides", "abc.example.com", `[abc.example.com]`, `[abc.example.com]`, "abc.example.com", "older", "older", "older"},
		// The newer, broader route is ordered after the older one.
		{"broader newer route", "abc.example.com", `[abc.example.com]`, `["*.example.com"]`, "abc.example.com", "older", "older", "older"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, hostPrecedenceDocs(tc.listener, tc.olderHosts, tc.newerHosts))
			withServices(snap, "default", "older", "newer")
			res := Translate(snap, gatewayOpts())
			assertRoutesAccepted(t, res, "older", "newer")
			lb := res.LoadBalancers[0]
			get := func(path string, headers map[string]string) string {
				return gatewayRoute(t, lb, 80, gwRequest{host: tc.host, path: path, method: "GET", headers: headers})
			}
			if got := get("/path/prefix/longer", a); got != tc.wantWithHeader {
				t.Errorf("with Header-A: %s, want %s", got, tc.wantWithHeader)
			}
			if got := get("/path/prefix/longer", nil); got != tc.wantWithout {
				t.Errorf("without Header-A: %s, want %s (what the more specific route does not match goes on)", got, tc.wantWithout)
			}
			if got := get("/only-older", a); got != tc.wantO {
				t.Errorf("/only-older: %s, want %s", got, tc.wantO)
			}
			if got := get("/elsewhere", a); got != "404" {
				t.Errorf("/elsewhere: %s, want 404", got)
			}
		})
	}
}

// A listener's 404 (listener isolation) comes after the routes of its
// host, however broad their hostnames: a route for "*.example.com" on
// the "abc.example.com" listener, shadowed by a "*.example.com"
// listener on the same port, still serves its paths there.
func TestGatewayHostPrecedenceIsolation(t *testing.T) {
	snap := gatewaySnap(t, gatewayClassDoc+`
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: exact, port: 80, protocol: HTTP, hostname: abc.example.com}
  - {name: wild, port: 80, protocol: HTTP, hostname: "*.example.com"}
---
kind: HTTPRoute
metadata: {name: broad}
spec:
  parentRefs: [{name: gw, sectionName: exact}]
  hostnames: ["*.example.com"]
  rules:
  - matches: [{path: {value: /api}}]
    backendRefs: [{name: broad, port: 80}]
---
kind: HTTPRoute
metadata: {name: other}
spec:
  parentRefs: [{name: gw, sectionName: wild}]
  rules:
  - backendRefs: [{name: other, port: 80}]
`)
	withServices(snap, "default", "broad", "other")
	res := Translate(snap, gatewayOpts())
	assertRoutesAccepted(t, res, "broad", "other")
	lb := res.LoadBalancers[0]
	for _, tc := range []struct{ host, path, want string }{
		{"abc.example.com", "/api/x", "broad"},
		{"abc.example.com", "/", "404"},
		{"x.example.com", "/", "other"},
	} {
		if got := gatewayRoute(t, lb, 80, gwRequest{host: tc.host, path: tc.path, method: "GET"}); got != tc.want {
			t.Errorf("%s%s: %s, want %s", tc.host, tc.path, got, tc.want)
		}
	}
}

// Where the hostname precedence puts a shorter path first, render's maps
// (which order by host and path alone) cannot say it: the port keeps
// the ACL rules, first match wins; where it reorders nothing, the maps
// stay.
func TestGatewayHostPrecedenceRender(t *testing.T) {
	for _, tc := range []struct {
		name         string
		older, newer string
		wantACL      bool
		listenerHost string
	}{
		{name: "reordered", older: `["*.example.com"]`, newer: `[abc.example.com]`, listenerHost: "abc.example.com", wantACL: true},
		{name: "one name", older: `[abc.example.com]`, newer: `[abc.example.com]`, listenerHost: "abc.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, hostPrecedenceDocs(tc.listenerHost, tc.older, tc.newer))
			withServices(snap, "default", "older", "newer")
			res := Translate(snap, gatewayOpts())
			assertRoutesAccepted(t, res, "older", "newer")
			lb := res.LoadBalancers[0]
			lb.VIP = "127.0.0.1"
			dir := t.TempDir()
			r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			acl := bytes.Contains(r.Fragment, []byte("\n    acl p_"))
			maps := bytes.Contains(r.Fragment, []byte("map_beg("))
			if acl != tc.wantACL || maps == tc.wantACL {
				t.Errorf("ACL rules %v, maps %v; want ACL rules %v:\n%s", acl, maps, tc.wantACL, r.Fragment)
			}
		})
	}
}

// assertRoutesAccepted fails unless each HTTPRoute of default named is
// Accepted on its first parent.
func assertRoutesAccepted(t *testing.T, res *translate.Result, names ...string) {
	t.Helper()
	for _, name := range names {
		parents := res.Gateway.Routes[routeRef("default", name)]
		if len(parents) == 0 {
			t.Fatalf("route %s: no parent status; problems %+v", name, res.Problems)
		}
		if c := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted)); c.Status != metav1.ConditionTrue {
			t.Errorf("route %s: Accepted %s/%s %s; problems %+v", name, c.Status, c.Reason, c.Message, res.Problems)
		}
	}
}
