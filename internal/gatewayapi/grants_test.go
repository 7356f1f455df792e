package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

// A backendRef to a Service of another namespace resolves only when a
// ReferenceGrant in that namespace lets HTTPRoutes of the route's
// namespace refer to it (by kind, namespace, and name when it names one);
// until then the route is accepted, ResolvedRefs=False/RefNotPermitted,
// and its rule gets no members.
func TestGatewayReferenceGrantBackends(t *testing.T) {
	base := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners: [{name: http, port: 80, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}]
---
kind: HTTPRoute
metadata: {name: cross, namespace: shop}
spec:
  parentRefs: [{name: gw, namespace: default}]
  hostnames: [cross.example]
  rules: [{backendRefs: [{name: api, namespace: backends, port: 80}]}]
`
	for _, tc := range []struct {
		name, grant string
		reason      gwv1.RouteConditionReason
	}{
		{"no grant", "", gwv1.RouteReasonRefNotPermitted},
		{"grant for the Service", grant("backends", "shop", "Service", "api"), gwv1.RouteReasonResolvedRefs},
		{"grant for every Service", grant("backends", "shop", "Service", ""), gwv1.RouteReasonResolvedRefs},
		{"grant for another Service", grant("backends", "shop", "Service", "other"), gwv1.RouteReasonRefNotPermitted},
		{"grant to another namespace", grant("backends", "elsewhere", "Service", ""), gwv1.RouteReasonRefNotPermitted},
		{"grant for Secrets", grant("backends", "shop", "Secret", ""), gwv1.RouteReasonRefNotPermitted},
		// A grant in the route's namespace consents to nothing: only the
		// target's namespace may.
		{"grant in the wrong namespace", grant("shop", "shop", "Service", ""), gwv1.RouteReasonRefNotPermitted},
		{"grant from Gateways", `
---
kind: ReferenceGrant
metadata: {name: g, namespace: backends}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: shop}]
  to: [{group: "", kind: Service}]
`, gwv1.RouteReasonRefNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, base+tc.grant)
			withServices(snap, "backends", "api", "other")
			res := Translate(snap, gatewayOpts())
			parents := res.Gateway.Routes[routeRef("shop", "cross")]
			if len(parents) != 1 {
				t.Fatalf("parents %+v (problems %+v)", parents, res.Problems)
			}
			if c := findCondition(t, parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
				t.Errorf("Accepted %s/%s: a backend not permitted must not refuse the route", c.Status, c.Reason)
			}
			c := findCondition(t, parents[0].Conditions, "ResolvedRefs")
			if c.Reason != string(tc.reason) {
				t.Errorf("ResolvedRefs %s/%s (%s), want %s", c.Status, c.Reason, c.Message, tc.reason)
			}
			// Not permitted: the rule's only backend is unresolved, so it
			// answers 500 (the spec) instead of reaching the Service.
			if tc.reason != gwv1.RouteReasonResolvedRefs {
				if p := routePolicy(t, res.LoadBalancers[0], "cross"); p.Action != model.ActionFixedResponse || p.StatusCode != 500 || p.PoolID != "" {
					t.Errorf("policy %+v, want FIXED_RESPONSE 500", p)
				}
				return
			}
			if pool := routePool(t, res.LoadBalancers[0], "cross"); len(pool.Members) != 1 || pool.Namespace != "backends" || pool.Service != "api" {
				t.Errorf("pool %+v", pool)
			}
		})
	}
}

// A certificateRef to a Secret of another namespace needs a
// ReferenceGrant there from Gateways of the Gateway's namespace;
// without it the listener is ResolvedRefs=False/RefNotPermitted and not
// served.
func TestGatewayReferenceGrantCertificates(t *testing.T) {
	base := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: https, port: 443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls, namespace: certs}]}}
`
	for _, tc := range []struct {
		name, grant string
		ok          bool
	}{
		{"no grant", "", false},
		{"grant for the Secrets", grantFromKind("certs", "Gateway", "default", "Secret"), true},
		{"grant from HTTPRoutes", grantFromKind("certs", "HTTPRoute", "default", "Secret"), false},
		{"grant for Services", grantFromKind("certs", "Gateway", "default", "Service"), false},
		{"grant to another namespace", grantFromKind("certs", "Gateway", "shop", "Secret"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, base+tc.grant)
			snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "certs", "shop-tls", "shop.example"))
			res := Translate(snap, gatewayOpts())
			st := res.Gateway.Gateways[gatewayRef("default", "gw")]
			if len(st.Listeners) != 1 {
				t.Fatalf("listeners %+v", st.Listeners)
			}
			c := findCondition(t, st.Listeners[0].Conditions, "ResolvedRefs")
			if (c.Status == metav1.ConditionTrue) != tc.ok || (!tc.ok && c.Reason != string(gwv1.ListenerReasonRefNotPermitted)) {
				t.Errorf("ResolvedRefs %s/%s (%s), want ok=%v", c.Status, c.Reason, c.Message, tc.ok)
			}
			if tc.ok != (len(res.LoadBalancers) == 1) {
				t.Fatalf("load balancers %d, want served=%v (problems %+v)", len(res.LoadBalancers), tc.ok, res.Problems)
			}
			if tc.ok {
				certs := res.LoadBalancers[0].Listeners[0].Certificates
				if len(certs) != 1 || certs[0].Namespace != "certs" || certs[0].Secret != "shop-tls" {
					t.Errorf("certificates %+v", certs)
				}
			}
		})
	}
}

// grant is a ReferenceGrant in ns letting HTTPRoutes of from refer to
// objects of kind (named name, or any when empty).
func grant(ns, from, kind, name string) string {
	to := "{group: \"\", kind: " + kind + "}"
	if name != "" {
		to = "{group: \"\", kind: " + kind + ", name: " + name + "}"
	}
	return "\n---\nkind: ReferenceGrant\nmetadata: {name: g, namespace: " + ns + "}\nspec:\n" +
		"  from: [{group: gateway.networking.k8s.io, kind: HTTPRoute, namespace: " + from + "}]\n  to: [" + to + "]\n"
}

// grantFromKind is a ReferenceGrant in ns letting objects of fromKind in
// from refer to every object of kind.
func grantFromKind(ns, fromKind, from, kind string) string {
	return "\n---\nkind: ReferenceGrant\nmetadata: {name: g, namespace: " + ns + "}\nspec:\n" +
		"  from: [{group: gateway.networking.k8s.io, kind: " + fromKind + ", namespace: " + from + "}]\n" +
		"  to: [{group: \"\", kind: " + kind + "}]\n"
}

// routePool is the pool of the first policy of route name.
func routePool(t *testing.T, lb *model.LoadBalancer, name string) *model.Pool {
	t.Helper()
	return lb.Pool(routePolicy(t, lb, name).PoolID)
}

func routePolicy(t *testing.T, lb *model.LoadBalancer, name string) model.L7Policy {
	t.Helper()
	for _, l := range lb.Listeners {
		for _, p := range l.Policies {
			if p.Source.Name == name {
				return p
			}
		}
	}
	t.Fatalf("no policy of route %s", name)
	return model.L7Policy{}
}
