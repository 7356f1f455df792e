package gatewayapi

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

func TestGatewayClassesAndGateways(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: GatewayClass
metadata: {name: with-params}
spec:
  controllerName: pier.dev/gateway-controller
  parametersRef: {group: "", kind: ConfigMap, name: x, namespace: default}
---
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other}
---
kind: Gateway
metadata: {name: params}
spec: {gatewayClassName: with-params, listeners: [{name: http, port: 80, protocol: HTTP}]}
---
kind: Gateway
metadata: {name: addresses}
spec:
  gatewayClassName: pier
  addresses: [{type: Hostname, value: lb.example.com}]
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
kind: Gateway
metadata: {name: mixed}
spec:
  gatewayClassName: pier
  listeners:
  - {name: sctp, port: 9000, protocol: example.com/sctp}
  - {name: http, port: 80, protocol: HTTP}
  - {name: http-b, port: 80, protocol: HTTP, hostname: b.example}
  - {name: clash-http, port: 81, protocol: HTTP}
  - {name: clash-https, port: 81, protocol: HTTPS, tls: {certificateRefs: [{name: cert}]}}
  - {name: same-host, port: 82, protocol: HTTP, hostname: a.example}
  - {name: same-host-2, port: 82, protocol: HTTP, hostname: a.example}
  - {name: no-cert, port: 443, protocol: HTTPS}
  - {name: foreign-cert, port: 444, protocol: HTTPS, tls: {certificateRefs: [{name: cert, namespace: other}]}}
  - {name: missing-cert, port: 445, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}
---
kind: Gateway
metadata: {name: all-bad}
spec:
  gatewayClassName: pier
  listeners: [{name: sctp, port: 53, protocol: example.com/sctp}]
---
kind: Gateway
metadata: {name: unresolved-only}
spec:
  gatewayClassName: pier
  listeners: [{name: tls, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}]
`
	res := Translate(gatewaySnap(t, docs), gatewayOpts())
	classes := res.Gateway.Classes
	if c := findCondition(t, classes["pier"], "Accepted"); c.Status != metav1.ConditionTrue || c.Reason != "Accepted" {
		t.Errorf("class pier: %s/%s", c.Status, c.Reason)
	}
	if c := findCondition(t, classes["with-params"], "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != "InvalidParameters" {
		t.Errorf("class with-params: %s/%s", c.Status, c.Reason)
	}
	if _, ok := classes["other"]; ok {
		t.Error("another controller's class got a status")
	}
	if res.Ours[gatewayRef("default", "params")] {
		t.Error("a Gateway of an unaccepted class is ours")
	}

	gwCond := func(name string) metav1.Condition {
		return findCondition(t, res.Gateway.Gateways[gatewayRef("default", name)].Conditions, "Accepted")
	}
	if c := gwCond("addresses"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonUnsupportedAddress) {
		t.Errorf("addresses: %s/%s", c.Status, c.Reason)
	}
	if c := gwCond("all-bad"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonListenersNotValid) {
		t.Errorf("all-bad: %s/%s", c.Status, c.Reason)
	}
	// Some listeners not valid: accepted, the reason says so (the
	// upstream suite's GatewayListenerUnsupportedProtocol).
	if c := gwCond("mixed"); c.Status != metav1.ConditionTrue || c.Reason != string(gwv1.GatewayReasonListenersNotValid) {
		t.Errorf("mixed: %s/%s", c.Status, c.Reason)
	}
	// A listener whose certificate does not resolve is accepted: so is
	// the Gateway, but it has nothing to serve.
	if c := gwCond("unresolved-only"); c.Status != metav1.ConditionTrue || c.Reason != string(gwv1.GatewayReasonAccepted) {
		t.Errorf("unresolved-only: %s/%s", c.Status, c.Reason)
	}
	for _, lb := range res.LoadBalancers {
		if lb.Sources[0].Name == "unresolved-only" {
			t.Error("unresolved-only got a load balancer, with no usable listener")
		}
	}
	for _, name := range []string{"addresses", "all-bad"} {
		if _, ok := res.Accepted[gatewayRef("default", name)]; ok {
			t.Errorf("%s got a load balancer", name)
		}
	}

	// Each listener's conditions: (type, status, reason) that must hold.
	type cond struct {
		typ    string
		status metav1.ConditionStatus
		reason string
	}
	want := map[gwv1.SectionName][]cond{
		"sctp":         {{"Accepted", "False", "UnsupportedProtocol"}, {"Programmed", "False", "Invalid"}},
		"http":         {{"Accepted", "True", "Accepted"}, {"Conflicted", "False", "NoConflicts"}, {"Programmed", "False", "Pending"}},
		"http-b":       {{"Accepted", "True", "Accepted"}, {"Conflicted", "False", "NoConflicts"}},
		"clash-http":   {{"Conflicted", "True", "ProtocolConflict"}, {"Programmed", "False", "Invalid"}},
		"clash-https":  {{"Conflicted", "True", "ProtocolConflict"}},
		"same-host":    {{"Conflicted", "True", "HostnameConflict"}},
		"same-host-2":  {{"Conflicted", "True", "HostnameConflict"}},
		"no-cert":      {{"ResolvedRefs", "False", "InvalidCertificateRef"}, {"Programmed", "False", "Invalid"}},
		"foreign-cert": {{"ResolvedRefs", "False", "RefNotPermitted"}},
		"missing-cert": {{"ResolvedRefs", "False", "InvalidCertificateRef"}},
	}
	st := res.Gateway.Gateways[gatewayRef("default", "mixed")]
	if len(st.Listeners) != len(want) {
		t.Fatalf("listener statuses: %d", len(st.Listeners))
	}
	for _, l := range st.Listeners {
		for _, w := range want[l.Name] {
			c := findCondition(t, l.Conditions, w.typ)
			if c.Status != w.status || c.Reason != w.reason {
				t.Errorf("listener %s: %s %s/%s, want %s/%s", l.Name, w.typ, c.Status, c.Reason, w.status, w.reason)
			}
		}
	}
	// Only the usable listeners reach the load balancer: the two HTTP
	// listeners on port 80 share one model listener.
	lb := res.LoadBalancers[0]
	if len(res.LoadBalancers) != 1 || len(lb.Listeners) != 1 || lb.Listeners[0].Port != 80 {
		t.Fatalf("load balancers %d, listeners %+v", len(res.LoadBalancers), lb.Listeners)
	}
	if lb.Provider != model.ProviderHAProxy || lb.Sources[0].Kind != model.KindGateway {
		t.Errorf("provider %s, sources %+v", lb.Provider, lb.Sources)
	}
}

func TestGatewayBackends(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners: [{name: http, port: 80, protocol: HTTP}]
`
	route := func(name, backendRefs string) string {
		return "---\nkind: HTTPRoute\nmetadata: {name: " + name + "}\nspec:\n  parentRefs: [{name: gw}]\n" +
			"  hostnames: [" + name + ".example]\n  rules: [{backendRefs: " + backendRefs + "}]\n"
	}
	docs += route("missing", "[{name: nope, port: 80}]")
	docs += route("foreign", "[{name: a, namespace: other, port: 80}]")
	docs += route("kind", "[{group: example.com, kind: Bucket, name: a}]")
	docs += route("noport", "[{name: a}]")
	docs += route("badport", "[{name: a, port: 81}]")
	docs += route("split", "[{name: a, port: 80, weight: 3}, {name: b, port: 80, weight: 1}, {name: zero, port: 80, weight: 0}]")
	docs += route("partial", "[{name: a, port: 80}, {name: nope, port: 80}]")
	docs += route("partial-split", "[{name: a, port: 80, weight: 3}, {name: b, port: 80, weight: 1}, {kind: Bucket, group: x.io, name: c, weight: 2}]")
	docs += route("unresolved-zero", "[{name: a, port: 80}, {name: nope, port: 80, weight: 0}]")
	docs += route("empty", "[]")
	// No backendRefs: 500, unless a redirect answers.
	docs += "---\nkind: HTTPRoute\nmetadata: {name: omitted}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [omitted.example]\n  rules: [{}]\n"
	docs += "---\nkind: HTTPRoute\nmetadata: {name: redirect}\nspec:\n  parentRefs: [{name: gw}]\n  hostnames: [redirect.example]\n" +
		"  rules: [{filters: [{type: RequestRedirect, requestRedirect: {hostname: r.example}}]}]\n"
	snap := gatewaySnap(t, docs)
	a, aes := backend("default", "a", "", 80, 1)
	b, bes := backend("default", "bb", "", 80, 2) // two endpoints, another address range
	b.Name, bes.Labels = "b", map[string]string{"kubernetes.io/service-name": "b"}
	zero, _ := backend("default", "zero", "", 80, 0)
	snap.Services = append(snap.Services, a, b, zero)
	snap.EndpointSlices = append(snap.EndpointSlices, aes, bes)
	res := Translate(snap, gatewayOpts())
	lb := res.LoadBalancers[0]

	if p := routePolicy(t, lb, "redirect"); p.Action == model.ActionFixedResponse || p.Options.Redirect == nil {
		t.Errorf("redirect without backendRefs: policy %+v, want the redirect", p)
	}
	// Unresolved backends answer 500 for their share (the spec): all of
	// a rule's (a FIXED_RESPONSE policy, no pool), or the share of their
	// weights (the pool's fail weight of its total).
	for _, tc := range []struct {
		route    string
		reason   gwv1.RouteConditionReason
		pool     string // the Service of the route's pool; "" for a 500 policy
		size     int    // members
		fail, of int    // the pool's fail share
	}{
		{"missing", gwv1.RouteReasonBackendNotFound, "", 0, 0, 0},
		{"foreign", gwv1.RouteReasonRefNotPermitted, "", 0, 0, 0},
		{"kind", gwv1.RouteReasonInvalidKind, "", 0, 0, 0},
		{"noport", gwv1.RouteReasonBackendNotFound, "", 0, 0, 0},
		{"badport", gwv1.RouteReasonBackendNotFound, "", 0, 0, 0},
		{"split", gwv1.RouteReasonResolvedRefs, "a+b", 3, 0, 0},
		{"partial", gwv1.RouteReasonBackendNotFound, "a", 1, 1, 2},
		{"partial-split", gwv1.RouteReasonInvalidKind, "a+b", 3, 2, 6},
		{"unresolved-zero", gwv1.RouteReasonBackendNotFound, "a", 1, 0, 0},
		{"empty", gwv1.RouteReasonResolvedRefs, "", 0, 0, 0},
		{"omitted", gwv1.RouteReasonResolvedRefs, "", 0, 0, 0},
	} {
		parents := res.Gateway.Routes[routeRef("default", tc.route)]
		if len(parents) != 1 {
			t.Fatalf("%s: parents %+v", tc.route, parents)
		}
		if c := findCondition(t, parents[0].Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: Accepted %s/%s: an unresolved backend must not refuse the route", tc.route, c.Status, c.Reason)
		}
		c := findCondition(t, parents[0].Conditions, "ResolvedRefs")
		if c.Reason != string(tc.reason) || (c.Status == metav1.ConditionTrue) != (tc.reason == gwv1.RouteReasonResolvedRefs) {
			t.Errorf("%s: ResolvedRefs %s/%s (%s), want %s", tc.route, c.Status, c.Reason, c.Message, tc.reason)
		}
		p := routePolicy(t, lb, tc.route)
		if tc.pool == "" {
			if p.Action != model.ActionFixedResponse || p.StatusCode != 500 || p.PoolID != "" {
				t.Errorf("%s: policy %+v, want FIXED_RESPONSE 500", tc.route, p)
			}
			continue
		}
		pool := lb.Pool(p.PoolID)
		if pool == nil {
			t.Errorf("%s: no pool", tc.route)
			continue
		}
		if pool.Service != tc.pool || len(pool.Members) != tc.size || pool.FailWeight != tc.fail || pool.FailTotal != tc.of {
			t.Errorf("%s: pool %q with %d members, fail %d/%d, want %q with %d, fail %d/%d", tc.route, pool.Service,
				len(pool.Members), pool.FailWeight, pool.FailTotal, tc.pool, tc.size, tc.fail, tc.of)
		}
		if tc.fail > 0 && pool.ID == model.ID("pool", "default", "a", "80") {
			t.Errorf("%s: the pool with a fail share is the Service's own, which other routes share", tc.route)
		}
		if tc.route == "split" {
			// a: weight 3 on one endpoint; b: weight 1 over two, so
			// each b endpoint gets 1/6 of a's: 256 and 43.
			for _, m := range pool.Members {
				want := 43
				if m.Target == "a-pod-0" {
					want = 256
				}
				if m.Weight != want {
					t.Errorf("split: member %s weight %d, want %d", m.Target, m.Weight, want)
				}
			}
		}
	}
}

// An HTTPS listener terminates with the Secret it names, its hostname as
// the SNI filter; two listeners on 443 share one model listener, the
// certificate without hostname first (the fallback for other names).
func TestGatewayHTTPS(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: shop, port: 443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: any, port: 443, protocol: HTTPS, tls: {certificateRefs: [{name: any-tls}]}}
---
kind: HTTPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw, sectionName: shop}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "shop-tls", "shop.example"),
		tlsSecretFor(t, "default", "any-tls", "any.example"))
	res := Translate(snap, gatewayOpts())
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("load balancers %d: %+v", len(res.LoadBalancers), res.Problems)
	}
	l := res.LoadBalancers[0].Listeners
	if len(l) != 1 || l[0].Port != 443 || l[0].Protocol != model.ProtocolTerminatedHTTPS {
		t.Fatalf("listeners %+v", l)
	}
	certs := l[0].Certificates
	if len(certs) != 2 || certs[0].Secret != "any-tls" || len(certs[0].Hosts) != 0 ||
		certs[1].Secret != "shop-tls" || len(certs[1].Hosts) != 1 || certs[1].Hosts[0] != "shop.example" {
		t.Errorf("certificates %+v", certs)
	}
	if got := gatewayRoute(t, res.LoadBalancers[0], 443, gwRequest{host: "shop.example", path: "/"}); got != "svc" {
		t.Errorf("shop.example: %s", got)
	}
	if got := gatewayRoute(t, res.LoadBalancers[0], 443, gwRequest{host: "any.example", path: "/"}); got != "404" {
		t.Errorf("any.example: %s (the route attached to the shop listener only)", got)
	}
	// The two listeners' hostnames, for render's 421 to a request whose
	// Host belongs to another listener than its SNI.
	if got := l[0].ListenerHosts; len(got) != 2 || got[0] != "" || got[1] != "shop.example" {
		t.Errorf("listener hosts %q, want [\"\" shop.example]", got)
	}
}
