package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/translate"
)

// Gateway routing measurement: one Gateway whose HTTPRoutes
// mix header and path matches, at n routing rules, against the Ingress
// path's RoutingConfig at the same n.
const (
	// GatewayBenchHeader must be sent for the first route: its rule
	// matches Exact /health on RoutingFirstHost and this header.
	GatewayBenchHeader      = "X-Bench"
	GatewayBenchHeaderValue = "yes"
)

// GatewayRoutingYAML is the Gateway API documents of the measurement: a
// GatewayClass of pier's controller, Gateway "bench" with an HTTP
// listener on port, and n rules:
//
//   - route "first" on RoutingFirstHost: Exact /health with header
//     X-Bench: yes to DataPlaneTarget;
//   - n-2 decoy rules, four per host r<k>.bench.example, one HTTPRoute
//     per host: PathPrefix /api/v1 with header X-Tenant: t<k>, PathPrefix
//     /api, PathPrefix /static with header X-Canary: on, and PathPrefix
//     /, each to one of ten decoy Services;
//   - route "catch-all", without hostnames: PathPrefix / to
//     DataPlaneTarget, which RoutingLastHost takes.
func GatewayRoutingYAML(n, port int) string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: pier}\nspec: {controllerName: pier.dev/gateway-controller}\n")
	w("---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: bench, namespace: bench}\n")
	w("spec:\n  gatewayClassName: pier\n  listeners: [{name: http, protocol: HTTP, port: %d}]\n", port)
	route := func(name, host string) {
		w("---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: %s, namespace: bench}\n", name)
		w("spec:\n  parentRefs: [{name: bench}]\n")
		if host != "" {
			w("  hostnames: [%s]\n", host)
		}
		w("  rules:\n")
	}
	rule := func(match, service string) {
		w("  - matches: [%s]\n    backendRefs: [{name: %s, port: 80}]\n", match, service)
	}
	route("first", RoutingFirstHost)
	rule(fmt.Sprintf("{path: {type: Exact, value: /health}, headers: [{name: %s, value: %q}]}", GatewayBenchHeader, GatewayBenchHeaderValue), DataPlaneTarget)
	decoy := func(j int) string { return fmt.Sprintf("decoy-%d", j%10) }
	for j := range n - 2 {
		k := j/4 + 1
		if j%4 == 0 {
			route(fmt.Sprintf("r%05d", k), fmt.Sprintf("r%05d.bench.example", k))
		}
		switch j % 4 {
		case 0:
			rule(fmt.Sprintf("{path: {type: PathPrefix, value: /api/v1}, headers: [{name: X-Tenant, value: t%d}]}", k), decoy(j))
		case 1:
			rule("{path: {type: PathPrefix, value: /api}}", decoy(j))
		case 2:
			rule(`{path: {type: PathPrefix, value: /static}, headers: [{name: X-Canary, value: "on"}]}`, decoy(j))
		case 3:
			rule("{path: {type: PathPrefix, value: /}}", decoy(j))
		}
	}
	route("catch-all", "")
	rule("{path: {type: PathPrefix, value: /}}", DataPlaneTarget)
	return b.String()
}

// GatewayRoutingConfig loads GatewayRoutingYAML(n) as pier run does (from
// a file), translates it with the echo Services, renders it for an
// instance in dir and writes its maps there. It checks that the Gateway
// became one load balancer with n policies.
func GatewayRoutingConfig(n int, targetPort, decoyPort int32, port int, dir string) ([]byte, *model.LoadBalancer, error) {
	if n < 2 {
		return nil, nil, fmt.Errorf("gateway routing fixture: n %d, want at least 2", n)
	}
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(GatewayRoutingYAML(n, port)), 0o600); err != nil {
		return nil, nil, err
	}
	snap, problems, err := files.Load([]string{path})
	if err != nil || len(problems) > 0 {
		return nil, nil, fmt.Errorf("gateway routing fixture: load: %v %v", err, problems)
	}
	svc, es := Backend("bench", DataPlaneTarget, targetPort, "127.0.0.1")
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	for k := range 10 {
		svc, es := Backend("bench", fmt.Sprintf("decoy-%d", k), decoyPort, "127.0.0.1")
		snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	}
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true // the backends listen on 127.0.0.1, as in pier run
	res := gatewayapi.Translate(snap, opts)
	if len(res.Problems) > 0 || len(res.LoadBalancers) != 1 {
		return nil, nil, fmt.Errorf("gateway routing fixture: %d load balancers, problems %v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	if len(lb.Listeners) != 1 || len(lb.Listeners[0].Policies) != n {
		return nil, nil, fmt.Errorf("gateway routing fixture: %d listeners, %d policies, want 1 and %d",
			len(lb.Listeners), len(lb.Listeners[0].Policies), n)
	}
	conf, err := render.Config(lb, render.Options{Dir: dir})
	if err != nil {
		return nil, nil, err
	}
	return conf, lb, writeMaps(lb, dir)
}
