package gatewayapi

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/translate"
)

// What translation makes of Gateways renders with the default options,
// header, query-parameter and method matches included, and routes
// through the maps (a request's cost does not grow with routes) rather
// than one ACL pair per policy: Gateway precedence is the order render's
// lookups decide (render's before and its match maps' shape order), so
// the policies are read as sorted and no listener falls back to ACLs.
// render's TestIntegrationMatches sends this table through HAProxy.
func TestGatewayLoadBalancersRender(t *testing.T) {
	snap := gatewaySnap(t, precedenceDocs)
	withServices(snap, "default", "prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
		"dup-first", "dup-second", "newer", "wild", "anyhost")
	res := Translate(snap, translate.DefaultOptions())
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("load balancers %d: %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if !bytes.Contains(r.Fragment, []byte("map_beg(")) || bytes.Contains(r.Fragment, []byte("\n    acl p_")) {
		t.Errorf("the Gateway's routes do not use the maps:\n%s", r.Fragment)
	}
	var shapes []string
	for _, m := range r.Maps {
		if name := filepath.Base(m.Path); strings.Contains(name, "-match.") && !strings.Contains(name, "match.default") {
			shapes = append(shapes, name)
		}
	}
	// method; x-a and x-b; x-a; q.
	if len(shapes) != 4 {
		t.Errorf("match maps %q, want one per shape (4)", shapes)
	}
}

// Unresolved backends render: a rule with none left answers 500 from the
// frontend, a partial one from its pool's backend for the unresolved share.
func TestGatewayUnresolvedRender(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw}]
  hostnames: [foo.com]
  rules:
  - matches: [{path: {value: /missing}}]
    backendRefs: [{name: nope, port: 80}]
  - matches: [{path: {value: /partial}}]
    backendRefs: [{name: a, port: 80, weight: 3}, {name: nope, port: 80}]
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "a")
	lb := Translate(snap, translate.DefaultOptions()).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{"deny deny_status 500 if { var(txn.pier_be) -m str pier_status_500 }",
		"deny deny_status 500 if { rand(4) -m int lt 1 }"} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
}

// A Gateway's TCP listeners render as TCP frontends beside its HTTP one:
// a TCPRoute's pool with its unresolved share refused, and a listener
// without a route refusing every connection.
func TestGatewayTCPRender(t *testing.T) {
	docs := tcpGatewayDoc + tcpRouteDoc("default", "pg", "{name: gw, sectionName: db}",
		"{name: pg, port: 80, weight: 3}, {name: nope, port: 80}")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "pg")
	lb := Translate(snap, translate.DefaultOptions()).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{"_5432 from pier_tcp\n    mode tcp\n    bind 127.0.0.1:5432 transparent\n    default_backend ",
		"_6379 from pier_tcp\n    mode tcp\n    bind 127.0.0.1:6379 transparent\n    tcp-request connection reject\n",
		"tcp-request content reject if { rand(4) -m int lt 1 }"} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
}
