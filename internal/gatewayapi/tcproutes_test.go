package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

const tcpGatewayDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: db, port: 5432, protocol: TCP, allowedRoutes: {namespaces: {from: All}}}
  - {name: cache, port: 6379, protocol: TCP}
`

func tcpRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindTCPRoute, Namespace: ns, Name: name}
}

func tcpRouteDoc(ns, name, parent, refs string) string {
	return `
---
kind: TCPRoute
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  parentRefs: [` + parent + `]
  rules: [{backendRefs: [` + refs + `]}]
`
}

// tcpParent is the route's one parent status, with its Accepted and
// ResolvedRefs conditions.
func tcpParent(t *testing.T, res *translate.Result, ref model.ObjectRef) (accepted, resolved metav1.Condition) {
	t.Helper()
	parents := res.Gateway.Routes[ref]
	if len(parents) != 1 {
		t.Fatalf("%s: parent statuses %+v", ref.Name, parents)
	}
	return findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted)),
		findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs))
}

func listenerOn(lb *model.LoadBalancer, port int) *model.Listener {
	for i := range lb.Listeners {
		if lb.Listeners[i].Port == port {
			return &lb.Listeners[i]
		}
	}
	return nil
}

// TestTCPRoute: a TCPRoute on a TCP listener is accepted and becomes the
// listener's one TCP pool, weighted by Service; the listener says it
// takes TCPRoutes and counts the route; the HTTP listener keeps its
// kinds and the TCP listener without a route refuses connections.
func TestTCPRoute(t *testing.T) {
	snap := gatewaySnap(t, tcpGatewayDoc+tcpRouteDoc("default", "pg", "{name: gw, sectionName: db}",
		"{name: pg, port: 80, weight: 3}, {name: pgsql, port: 80, weight: 1}"))
	withServices(snap, "default", "pg", "pgsql")
	res := Translate(snap, gatewayOpts())
	acc, rr := tcpParent(t, res, tcpRef("default", "pg"))
	if acc.Status != metav1.ConditionTrue || rr.Status != metav1.ConditionTrue {
		t.Fatalf("Accepted %+v ResolvedRefs %+v", acc, rr)
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers", len(res.LoadBalancers))
	}
	lb := res.LoadBalancers[0]
	db := listenerOn(lb, 5432)
	if db == nil || db.Protocol != model.ProtocolTCP || len(db.Policies) != 0 {
		t.Fatalf("listener 5432: %+v", db)
	}
	pool := lb.Pool(db.DefaultPoolID)
	if pool == nil || !pool.TCP || len(pool.Members) != 2 {
		t.Fatalf("pool %+v, want a TCP pool of both Services' members", pool)
	}
	// 256 and 85: HAProxy's weights are integers of at most 256.
	if w0, w1 := max(pool.Members[0].Weight, pool.Members[1].Weight), min(pool.Members[0].Weight, pool.Members[1].Weight); w0 != 256 || w1 != 85 {
		t.Errorf("member weights %d and %d, want 256 and 85 (3:1)", w0, w1)
	}
	if cache := listenerOn(lb, 6379); cache == nil || cache.DefaultPoolID != "" {
		t.Errorf("listener 6379 without a route: %+v, want no pool (connections refused)", cache)
	}
	st := res.Gateway.Gateways[gatewayRef("default", "gw")]
	for _, l := range st.Listeners {
		kinds := []string{}
		for _, k := range l.SupportedKinds {
			kinds = append(kinds, string(k.Kind))
		}
		want, attached := "HTTPRoute,GRPCRoute", int32(0)
		if l.Name != "http" {
			want = "TCPRoute"
		}
		if l.Name == "db" {
			attached = 1
		}
		if strings.Join(kinds, ",") != want || l.AttachedRoutes != attached {
			t.Errorf("listener %s: kinds %v attached %d, want %s and %d", l.Name, kinds, l.AttachedRoutes, want, attached)
		}
	}
}

// TestTCPRouteNotAllowed: a TCPRoute naming an HTTP listener, or a TCP
// listener whose allowedRoutes take only its own namespace, is not
// accepted (NotAllowedByListeners); an HTTPRoute on a TCP listener is not
// either. Nothing is served for them.
func TestTCPRouteNotAllowed(t *testing.T) {
	docs := tcpGatewayDoc +
		tcpRouteDoc("default", "on-http", "{name: gw, sectionName: http}", "{name: svc, port: 80}") +
		tcpRouteDoc("shop", "other-ns", "{name: gw, namespace: default, sectionName: cache}", "{name: svc, port: 80}") +
		attachRouteDoc("default", "web", "{name: gw, sectionName: db}", "web.example.com", "/")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	withServices(snap, "shop", "svc")
	res := Translate(snap, gatewayOpts())
	for _, ref := range []model.ObjectRef{tcpRef("default", "on-http"), tcpRef("shop", "other-ns"), routeRef("default", "web")} {
		acc := findCondition(t, res.Gateway.Routes[ref][0].Conditions, string(gwv1.RouteConditionAccepted))
		if acc.Status != metav1.ConditionFalse || acc.Reason != string(gwv1.RouteReasonNotAllowedByListeners) {
			t.Errorf("%s: Accepted %+v, want False/NotAllowedByListeners", ref.Name, acc)
		}
	}
	lb := res.LoadBalancers[0]
	if l := listenerOn(lb, 6379); l == nil || l.DefaultPoolID != "" {
		t.Errorf("listener 6379: %+v, want no pool", l)
	}
	if l := listenerOn(lb, 5432); l == nil || l.DefaultPoolID != "" || len(l.Policies) != 0 {
		t.Errorf("listener 5432: %+v, want no pool and no policies", l)
	}
}

// TestTCPRouteBackends: a backendRef to a missing Service is
// ResolvedRefs=False/BackendNotFound and its share of connections is
// refused (the pool's failing share); when every ref fails the listener
// has no pool at all. A route stays accepted either way.
func TestTCPRouteBackends(t *testing.T) {
	docs := tcpGatewayDoc +
		tcpRouteDoc("default", "half", "{name: gw, sectionName: db}", "{name: here, port: 80}, {name: gone, port: 80}") +
		tcpRouteDoc("default", "none", "{name: gw, sectionName: cache}", "{name: gone, port: 80}")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "here")
	res := Translate(snap, gatewayOpts())
	for _, name := range []string{"half", "none"} {
		acc, rr := tcpParent(t, res, tcpRef("default", name))
		if acc.Status != metav1.ConditionTrue || rr.Status != metav1.ConditionFalse || rr.Reason != string(gwv1.RouteReasonBackendNotFound) {
			t.Errorf("%s: Accepted %+v ResolvedRefs %+v", name, acc, rr)
		}
	}
	lb := res.LoadBalancers[0]
	pool := lb.Pool(listenerOn(lb, 5432).DefaultPoolID)
	if pool == nil || !pool.TCP || pool.FailWeight != 1 || pool.FailTotal != 2 {
		t.Errorf("half's pool %+v, want TCP with 1 of 2 refused", pool)
	}
	if l := listenerOn(lb, 6379); l.DefaultPoolID != "" {
		t.Errorf("none's listener has pool %s", l.DefaultPoolID)
	}
	found := false
	for _, p := range res.Problems {
		found = found || (p.Kind == model.KindTCPRoute && p.Name == "none" && p.Reason == string(gwv1.RouteReasonBackendNotFound))
	}
	if !found {
		t.Errorf("no BackendNotFound problem for none: %+v", res.Problems)
	}
}

// TestTCPRouteReferenceGrant: a backendRef to another namespace's
// Service needs a ReferenceGrant there from TCPRoutes of the route's
// namespace; one from HTTPRoutes does not do.
func TestTCPRouteReferenceGrant(t *testing.T) {
	base := tcpGatewayDoc + tcpRouteDoc("shop", "cross", "{name: gw, namespace: default, sectionName: db}",
		"{name: pg, namespace: backends, port: 80}")
	grant := func(kind string) string {
		return `
---
kind: ReferenceGrant
metadata: {name: g, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ` + kind + `, namespace: shop}]
  to: [{group: "", kind: Service}]
`
	}
	for _, tc := range []struct {
		name, grant string
		want        gwv1.RouteConditionReason
	}{
		{"none", "", gwv1.RouteReasonRefNotPermitted},
		{"httproutes", grant("HTTPRoute"), gwv1.RouteReasonRefNotPermitted},
		{"tcproutes", grant("TCPRoute"), gwv1.RouteReasonResolvedRefs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, base+tc.grant)
			withServices(snap, "backends", "pg")
			res := Translate(snap, gatewayOpts())
			acc, rr := tcpParent(t, res, tcpRef("shop", "cross"))
			if acc.Status != metav1.ConditionTrue || rr.Reason != string(tc.want) {
				t.Fatalf("Accepted %+v ResolvedRefs %+v, want %s", acc, rr, tc.want)
			}
			pool := res.LoadBalancers[0].Pool(listenerOn(res.LoadBalancers[0], 5432).DefaultPoolID)
			if served := pool != nil; served != (tc.want == gwv1.RouteReasonResolvedRefs) {
				t.Errorf("pool %+v", pool)
			}
		})
	}
}

// TestTCPRouteOnePerListener: of two TCPRoutes on one TCP listener the
// older is served; the newer is Accepted, as the spec's rule for
// conflicts has it, but not served, which its message and a Warning
// (ListenerInUse) say; a TCPRoute of two rules is refused
// (UnsupportedValue). All count in attachedRoutes, as the spec counts
// routes a listener allows.
func TestTCPRouteOnePerListener(t *testing.T) {
	docs := tcpGatewayDoc +
		tcpRouteDoc("default", "first", "{name: gw, sectionName: db}", "{name: a, port: 80}") +
		tcpRouteDoc("default", "second", "{name: gw, sectionName: db}", "{name: b, port: 80}") + `
---
kind: TCPRoute
metadata: {name: two-rules}
spec:
  parentRefs: [{name: gw, sectionName: cache}]
  rules: [{backendRefs: [{name: a, port: 80}]}, {backendRefs: [{name: b, port: 80}]}]
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "a", "b")
	res := Translate(snap, gatewayOpts())
	for name, want := range map[string]string{"first": "Accepted", "second": "Accepted", "two-rules": string(gwv1.RouteReasonUnsupportedValue)} {
		acc, _ := tcpParent(t, res, tcpRef("default", name))
		if acc.Reason != want || (acc.Status == metav1.ConditionTrue) != (want == "Accepted") {
			t.Errorf("%s: Accepted %+v, want %s", name, acc, want)
		}
	}
	if acc, _ := tcpParent(t, res, tcpRef("default", "second")); !strings.Contains(acc.Message, "not served: the older TCPRoute default/first") {
		t.Errorf("second: Accepted message %q does not say the older route serves the listener", acc.Message)
	}
	warned := false
	for _, p := range res.Problems {
		if p.Kind == model.KindTCPRoute && p.Name == "second" && p.Reason == reasonListenerInUse && p.Severity == model.SeverityWarning {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no ListenerInUse Warning for the newer route: %+v", res.Problems)
	}
	lb := res.LoadBalancers[0]
	if pool := lb.Pool(listenerOn(lb, 5432).DefaultPoolID); pool == nil || pool.Service != "a" {
		t.Errorf("listener 5432 pool %+v, want the older route's (a)", pool)
	}
	if l := listenerOn(lb, 6379); l.DefaultPoolID != "" {
		t.Errorf("two-rules served: %+v", l)
	}
}

// TestTCPListenerConflicts: a TCP listener on an HTTP listener's port
// conflicts with it (ProtocolConflict, neither served), two TCP
// listeners on one port conflict with each other, and a TCP listener
// with a hostname or tls (which the API server refuses, a file may not)
// is not accepted.
func TestTCPListenerConflicts(t *testing.T) {
	snap := gatewaySnap(t, gatewayClassDoc+`
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: tcp80, port: 80, protocol: TCP}
  - {name: a, port: 9000, protocol: TCP}
  - {name: b, port: 9000, protocol: TCP}
  - {name: named, port: 9001, protocol: TCP, hostname: db.example.com}
  - {name: ok, port: 9002, protocol: TCP}
  - {name: kinds, port: 9003, protocol: TCP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}
`)
	res := Translate(snap, gatewayOpts())
	st := res.Gateway.Gateways[gatewayRef("default", "gw")]
	want := map[string]struct{ typ, status, reason string }{
		"http":  {"Conflicted", "True", string(gwv1.ListenerReasonProtocolConflict)},
		"tcp80": {"Conflicted", "True", string(gwv1.ListenerReasonProtocolConflict)},
		"a":     {"Conflicted", "True", string(gwv1.ListenerReasonHostnameConflict)},
		"b":     {"Conflicted", "True", string(gwv1.ListenerReasonHostnameConflict)},
		"named": {"Accepted", "False", string(gwv1.ListenerReasonInvalid)},
		"ok":    {"Accepted", "True", string(gwv1.ListenerReasonAccepted)},
		"kinds": {"ResolvedRefs", "False", string(gwv1.ListenerReasonInvalidRouteKinds)},
	}
	for _, l := range st.Listeners {
		w := want[string(l.Name)]
		c := findCondition(t, l.Conditions, w.typ)
		if string(c.Status) != w.status || c.Reason != w.reason {
			t.Errorf("listener %s: %s %+v, want %s/%s", l.Name, w.typ, c, w.status, w.reason)
		}
	}
	lb := res.LoadBalancers[0]
	var ports []int
	for _, l := range lb.Listeners {
		ports = append(ports, l.Port)
	}
	if len(ports) != 1 || ports[0] != 9002 {
		t.Errorf("served ports %v, want only 9002", ports)
	}
}
