package translate

import (
	"bytes"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
)

// What translation makes of Gateways renders, and routes through the
// maps (a request's cost does not grow with routes) rather than one ACL
// pair per policy: Gateway precedence on host and path is render's
// order. A policy with a header, query or method rule does not render
// yet, which is why Options.GatewayExtendedMatches stays off.
func TestGatewayLoadBalancersRender(t *testing.T) {
	var kept []string
	for i, line := range strings.Split(precedenceDocs, "\n") {
		if strings.Contains(line, "method:") || strings.Contains(line, "headers:") || strings.Contains(line, "queryParams:") {
			line = "  - matches: [{path: {type: Exact, value: /only-path-" + itoa(i) + "}}]"
		}
		kept = append(kept, line)
	}
	snap := gatewaySnap(t, strings.Join(kept, "\n"))
	withServices(snap, "default", "prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
		"dup-first", "dup-second", "newer", "wild", "anyhost")
	opts := DefaultOptions()
	res := Gateways(snap, opts)
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
	if len(r.Maps) == 0 || !bytes.Contains(r.Fragment, []byte("map_beg(")) {
		t.Errorf("the Gateway's routes do not use the maps:\n%s", r.Fragment)
	}

	snap = gatewaySnap(t, precedenceDocs)
	withServices(snap, "default", "prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
		"dup-first", "dup-second", "newer", "wild", "anyhost")
	opts.GatewayExtendedMatches = true
	lb = Gateways(snap, opts).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	if _, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir}); err == nil {
		t.Error("render accepted header/query/method rules: turn GatewayExtendedMatches on and update docs/gateway-api.md")
	}
}
