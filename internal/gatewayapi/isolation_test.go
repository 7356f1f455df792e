package gatewayapi

import (
	"bytes"
	"fmt"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// isolationDocs is the upstream suite's GatewayHTTPListenerIsolation:
// four listeners on port 80 (none, *.example.com, *.foo.example.com,
// abc.foo.example.com), one route on each by sectionName, with the
// given hostnames (the suite's second Gateway names all four on every
// route), each to a Service of its own.
func isolationDocs(hostnames string) string {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: empty-hostname, port: 80, protocol: HTTP}
  - {name: wildcard-example-com, port: 80, protocol: HTTP, hostname: "*.example.com"}
  - {name: wildcard-foo-example-com, port: 80, protocol: HTTP, hostname: "*.foo.example.com"}
  - {name: abc-foo-example-com, port: 80, protocol: HTTP, hostname: abc.foo.example.com}
`
	for _, l := range []string{"empty-hostname", "wildcard-example-com", "wildcard-foo-example-com", "abc-foo-example-com"} {
		docs += fmt.Sprintf(`---
kind: HTTPRoute
metadata: {name: %[1]s}
spec:
  parentRefs: [{name: gw, sectionName: %[1]s}]
  hostnames: %[2]s
  rules:
  - matches: [{path: {type: PathPrefix, value: /%[1]s}}]
    backendRefs: [{name: %[1]s, port: 80}]
`, l, hostnames)
	}
	return docs
}

// A request goes to the most specific listener whose hostname matches
// its host, and only that listener's routes answer it: 404 when none of
// them matches, never a less specific listener's route.
func TestGatewayListenerIsolation(t *testing.T) {
	services := []string{"empty-hostname", "wildcard-example-com", "wildcard-foo-example-com", "abc-foo-example-com"}
	hosts := map[string]string{ // request host → the listener that owns it
		"bar.com":             "empty-hostname",
		"bar.example.com":     "wildcard-example-com",
		"bar.foo.example.com": "wildcard-foo-example-com",
		"abc.foo.example.com": "abc-foo-example-com",
		"x.y.foo.example.com": "wildcard-foo-example-com",
	}
	for name, hostnames := range map[string]string{
		"hostnames only in listeners": "[]",
		"intersecting hostnames":      `[bar.com, "*.example.com", "*.foo.example.com", abc.foo.example.com]`,
	} {
		t.Run(name, func(t *testing.T) {
			snap := gatewaySnap(t, isolationDocs(hostnames))
			withServices(snap, "default", services...)
			res := Translate(snap, gatewayOpts())
			if len(res.LoadBalancers) != 1 {
				t.Fatalf("load balancers %d: %+v", len(res.LoadBalancers), res.Problems)
			}
			lb := res.LoadBalancers[0]
			for host, owner := range hosts {
				for _, path := range services {
					want := "404"
					if path == owner {
						want = owner
					}
					if got := gatewayRoute(t, lb, 80, gwRequest{host: host, path: "/" + path}); got != want {
						t.Errorf("%s/%s: %s, want %s", host, path, got, want)
					}
				}
			}
			// Every route is accepted: isolation is routing, not attachment.
			for _, s := range services {
				if _, ok := res.Gateway.Routes[routeRef("default", s)]; !ok {
					t.Errorf("route %s has no parent status", s)
				}
				if c := findCondition(t, res.Gateway.Routes[routeRef("default", s)][0].Conditions, "Accepted"); c.Status != "True" {
					t.Errorf("route %s: Accepted %s/%s", s, c.Status, c.Reason)
				}
			}
		})
	}
}

// A listener alone on its port, or whose hostname no other listener
// there matches, gets no isolation entry: a request matching none of its
// routes is already a 404. A route on the listener's own host and "/"
// keeps its entry: the isolation entry comes after it.
func TestGatewayIsolationEntries(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: a, port: 80, protocol: HTTP, hostname: a.example}
  - {name: b, port: 80, protocol: HTTP, hostname: b.example}
  - {name: any, port: 81, protocol: HTTP}
  - {name: c, port: 81, protocol: HTTP, hostname: c.example}
---
kind: HTTPRoute
metadata: {name: root}
spec:
  parentRefs: [{name: gw, sectionName: c}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: a}
spec:
  parentRefs: [{name: gw, sectionName: a}]
  rules: [{matches: [{path: {value: /x}}], backendRefs: [{name: svc, port: 80}]}]
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	lb := Translate(snap, gatewayOpts()).LoadBalancers[0]
	for _, l := range lb.Listeners {
		if l.ListenerHosts != nil {
			t.Errorf("listener %s: listener hosts %q on HTTP (421 is for TLS, whose SNI chose a listener)", l.Name, l.ListenerHosts)
		}
		for _, p := range l.Policies {
			if p.Action == model.ActionFixedResponse {
				t.Errorf("listener %s: isolation entry %+v, but no listener shadows another", l.Name, p.Rules)
			}
		}
	}
	if got := gatewayRoute(t, lb, 81, gwRequest{host: "c.example", path: "/anything"}); got != "svc" {
		t.Errorf("c.example/anything: %s, want svc (the route's own \"/\")", got)
	}
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "b.example", path: "/x"}); got != "404" {
		t.Errorf("b.example/x: %s, want 404", got)
	}
}

// The isolation entries render as map values answered by one deny line
// (404), and the listener still routes through the maps.
func TestGatewayIsolationRender(t *testing.T) {
	snap := gatewaySnap(t, isolationDocs("[]"))
	withServices(snap, "default", "empty-hostname", "wildcard-example-com", "wildcard-foo-example-com", "abc-foo-example-com")
	lb := Translate(snap, translate.DefaultOptions()).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{"deny deny_status 404 if { var(txn.pier_be) -m str pier_status_404 }", "map_beg("} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
	if bytes.Contains(r.Fragment, []byte("\n    acl p_")) {
		t.Errorf("isolation fell back to ACL rules:\n%s", r.Fragment)
	}
}
