package gatewayapi

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

const grpcGatewayDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
`

func grpcRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindGRPCRoute, Namespace: ns, Name: name}
}

// TestGRPCRoute: method matches become :path matches (Exact service and
// method, a service alone as its segment prefix), headers and header
// filters carry over, and the pools speak h2c to the members.
func TestGRPCRoute(t *testing.T) {
	snap := gatewaySnap(t, grpcGatewayDoc+`
---
kind: GRPCRoute
metadata: {name: echo}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules:
  - matches:
    - method: {service: pkg.Echo, method: Get}
      headers: [{name: version, value: "2"}]
    filters:
    - type: ResponseHeaderModifier
      responseHeaderModifier: {set: [{name: x-served, value: grpc}]}
    backendRefs: [{name: v2, port: 80}]
  - matches:
    - method: {service: pkg.Echo}
    backendRefs: [{name: v1, port: 80, weight: 3}, {name: v2, port: 80, weight: 1}]
`)
	withServices(snap, "default", "v1", "v2")
	res := Translate(snap, gatewayOpts())
	parents := res.Gateway.Routes[grpcRef("default", "echo")]
	if len(parents) != 1 {
		t.Fatalf("parent statuses %+v", res.Gateway.Routes)
	}
	if c := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted)); c.Status != metav1.ConditionTrue {
		t.Fatalf("Accepted: %+v", c)
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers", len(res.LoadBalancers))
	}
	lb := res.LoadBalancers[0]
	var paths []string
	for _, p := range lb.Listeners[0].Policies {
		if p.Source.Kind != model.KindGRPCRoute {
			t.Errorf("policy source %+v", p.Source)
		}
		pool := lb.Pool(p.PoolID)
		if pool == nil || pool.Protocol != model.BackendGRPC {
			t.Errorf("policy %s: pool %+v, want one of protocol GRPC", p.ID, pool)
		}
		for _, r := range p.Rules {
			if r.Type == model.RulePath {
				paths = append(paths, string(r.Compare)+" "+r.Value)
			}
		}
	}
	want := []string{string(model.CompareEqualTo) + " /pkg.Echo/Get", string(model.CompareStartsWith) + " /pkg.Echo"}
	if strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Errorf("path rules %v, want %v (Exact first)", paths, want)
	}
	st := res.Gateway.Gateways[gatewayRef("default", "gw")]
	kinds := st.Listeners[0].SupportedKinds
	if len(kinds) != 2 || kinds[0].Kind != model.KindHTTPRoute || kinds[1].Kind != model.KindGRPCRoute {
		t.Errorf("supportedKinds %+v", kinds)
	}
}

// TestGRPCRouteHostileNames: a service or method name that is not a gRPC
// identifier (";evil", a newline, a slash) refuses its GRPCRoute with
// UnsupportedValue and a problem naming the field; the other GRPCRoute
// and the HTTPRoute on the same Gateway keep serving.
func TestGRPCRouteHostileNames(t *testing.T) {
	hostile := []struct{ name, method string }{
		{"semicolon", "{service: \"pkg.Echo;evil\", method: Get}"},
		{"newline", "{service: pkg.Echo, method: \"Get\\nuse_backend x\"}"},
		{"slash", "{service: \"pkg/Echo\", method: Get}"},
		{"space", "{service: \"pkg.Echo Get\"}"},
		{"regex", "{type: RegularExpression, service: \"pkg.*\"}"},
		{"methodonly", "{method: Get}"},
	}
	docs := grpcGatewayDoc + `
---
kind: GRPCRoute
metadata: {name: good}
spec:
  parentRefs: [{name: gw}]
  hostnames: [good.example.com]
  rules: [{matches: [{method: {service: pkg.Echo, method: Get}}], backendRefs: [{name: svc, port: 80}]}]
` + attachRouteDoc("default", "web", "{name: gw}", "web.example.com", "/")
	for _, h := range hostile {
		docs += `
---
kind: GRPCRoute
metadata: {name: ` + h.name + `}
spec:
  parentRefs: [{name: gw}]
  hostnames: [` + h.name + `.example.com]
  rules: [{matches: [{method: ` + h.method + `}], backendRefs: [{name: svc, port: 80}]}]
`
	}
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	res := Translate(snap, gatewayOpts())
	for _, h := range hostile {
		parents := res.Gateway.Routes[grpcRef("default", h.name)]
		if len(parents) != 1 {
			t.Errorf("%s: %d parent statuses", h.name, len(parents))
			continue
		}
		c := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
		if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.Contains(c.Message, "matches[0]") {
			t.Errorf("%s: Accepted %+v, want False/UnsupportedValue naming the match", h.name, c)
		}
		if strings.ContainsAny(c.Message, "\n") {
			t.Errorf("%s: a raw newline in the condition: %q", h.name, c.Message)
		}
		found := false
		for _, p := range res.Problems {
			found = found || (p.Kind == model.KindGRPCRoute && p.Name == h.name && p.Severity == model.SeverityError)
		}
		if !found {
			t.Errorf("%s: no problem", h.name)
		}
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers", len(res.LoadBalancers))
	}
	lb := res.LoadBalancers[0]
	served := map[string]bool{}
	for _, p := range lb.Listeners[0].Policies {
		served[p.Source.Kind+"/"+p.Source.Name] = true
		for _, r := range p.Rules {
			if strings.ContainsAny(r.Value, "; \n") {
				t.Errorf("policy %s carries %q", p.ID, r.Value)
			}
		}
	}
	if !served["GRPCRoute/good"] || !served["HTTPRoute/web"] || len(served) != 2 {
		t.Errorf("served %v, want the good GRPCRoute and the HTTPRoute only", served)
	}
}

// TestGRPCRouteAndHTTPRouteOneHostname: on one listener, of an HTTPRoute
// and a GRPCRoute whose hostnames meet, the older is accepted and the
// other refused; hostnames apart, both serve.
func TestGRPCRouteAndHTTPRouteOneHostname(t *testing.T) {
	grpc := func(name, host string) string {
		return `
---
kind: GRPCRoute
metadata: {name: ` + name + `}
spec:
  parentRefs: [{name: gw}]
  hostnames: [` + host + `]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
`
	}
	snap := gatewaySnap(t, grpcGatewayDoc+
		attachRouteDoc("default", "web", "{name: gw}", "shared.example.com", "/")+ // older than g1
		grpc("g1", "\"*.example.com\"")+
		grpc("g2", "grpc.example.net")+
		attachRouteDoc("default", "late", "{name: gw}", "grpc.example.net", "/")) // newer than g2
	withServices(snap, "default", "svc")
	res := Translate(snap, gatewayOpts())
	accepted := func(ref model.ObjectRef) metav1.Condition {
		parents := res.Gateway.Routes[ref]
		if len(parents) != 1 {
			t.Fatalf("%s: %d parent statuses", ref, len(parents))
		}
		return findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
	}
	for _, c := range []struct {
		ref  model.ObjectRef
		want metav1.ConditionStatus
	}{
		{routeRef("default", "web"), metav1.ConditionTrue},
		{grpcRef("default", "g1"), metav1.ConditionFalse},
		{grpcRef("default", "g2"), metav1.ConditionTrue},
		{routeRef("default", "late"), metav1.ConditionFalse},
	} {
		got := accepted(c.ref)
		if got.Status != c.want || (c.want == metav1.ConditionFalse && got.Reason != reasonRouteKindConflict) {
			t.Errorf("%s: %+v, want %s", c.ref, got, c.want)
		}
	}
}

// TestHTTPRouteH2CBackend: an HTTPRoute to a Service port whose
// appProtocol is kubernetes.io/h2c gets the h2c pool a GRPCRoute to it
// gets (one pool, the same ID); a rule weighing an h2c Service against a
// plain one keeps one HTTP/1.1 pool and a Warning says why.
func TestHTTPRouteH2CBackend(t *testing.T) {
	snap := gatewaySnap(t, grpcGatewayDoc+`
---
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  hostnames: [h2c.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /h2c}}]
    backendRefs: [{name: fast, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /mixed}}]
    backendRefs: [{name: fast, port: 80}, {name: plain, port: 80}]
---
kind: GRPCRoute
metadata: {name: rpc}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example.com]
  rules: [{backendRefs: [{name: fast, port: 80}]}]
`)
	withServices(snap, "default", "fast", "plain")
	h2c := "kubernetes.io/h2c"
	for _, svc := range snap.Services {
		if svc.Name == "fast" {
			svc.Spec.Ports[0].AppProtocol = &h2c
		}
	}
	res := Translate(snap, gatewayOpts())
	lb := res.LoadBalancers[0]
	pools := map[string]*model.Pool{} // by route kind and path prefix
	for _, p := range lb.Listeners[0].Policies {
		path := ""
		for _, r := range p.Rules {
			if r.Type == model.RulePath {
				path = r.Value
			}
		}
		pools[p.Source.Kind+" "+path] = lb.Pool(p.PoolID)
	}
	h2cPath, mixed, rpc := pools[model.KindHTTPRoute+" /h2c"], pools[model.KindHTTPRoute+" /mixed"], pools[model.KindGRPCRoute+" /"]
	if h2cPath == nil || h2cPath.Protocol != model.BackendGRPC {
		t.Fatalf("/h2c pool %+v, want h2c (protocol GRPC); policies %v", h2cPath, pools)
	}
	if rpc == nil || rpc.ID != h2cPath.ID {
		t.Errorf("GRPCRoute pool %+v, want the HTTPRoute's h2c pool %s; policies %v", rpc, h2cPath.ID, pools)
	}
	if mixed == nil || mixed.Protocol != "" {
		t.Errorf("/mixed pool %+v, want HTTP/1.1", mixed)
	}
	if !slices.ContainsFunc(res.Problems, func(p model.Problem) bool {
		return p.Name == "web" && p.Severity == model.SeverityWarning && strings.Contains(p.Message, "appProtocol kubernetes.io/h2c")
	}) {
		t.Errorf("no Warning for the mixed rule: %+v", res.Problems)
	}
}
