package gatewayapi

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// tlsGatewayDoc: on 443, an HTTPS listener for shop.example, a TLS
// listener for *.apps.example and one without hostname (every other
// SNI); on 8443 a TLS listener alone.
const tlsGatewayDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: shop, port: 443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: apps, port: 443, protocol: TLS, hostname: "*.apps.example", tls: {mode: Passthrough}, allowedRoutes: {namespaces: {from: All}}}
  - {name: any, port: 443, protocol: TLS, tls: {mode: Passthrough}}
  - {name: alone, port: 8443, protocol: TLS, tls: {mode: Passthrough}}
`

func tlsRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindTLSRoute, Namespace: ns, Name: name}
}

func tlsRouteDoc(ns, name, parent, hosts, refs string) string {
	return `
---
kind: TLSRoute
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  parentRefs: [` + parent + `]
  hostnames: [` + hosts + `]
  rules: [{backendRefs: [` + refs + `]}]
`
}

func tlsSnap(t *testing.T, docs string, services ...string) *source.Snapshot {
	t.Helper()
	snap := gatewaySnap(t, tlsGatewayDoc+docs)
	withServices(snap, "default", services...)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "shop-tls", "shop.example"))
	return snap
}

// passthroughOf is the listener's SNI routes as "host>target" (target a
// pool's name, "refuse" or "terminate"), in order.
func passthroughOf(lb *model.LoadBalancer, l *model.Listener) []string {
	var out []string
	for _, r := range l.Passthrough {
		target := "refuse"
		switch {
		case r.Terminate:
			target = "terminate"
		case r.Decrypt:
			target = "decrypt:" + lb.Pool(r.PoolID).Name
		case r.PoolID != "":
			target = lb.Pool(r.PoolID).Name
		}
		out = append(out, r.Host+">"+target)
	}
	return out
}

// TestTLSRoute: TLSRoutes on TLS listeners beside an HTTPS one. A
// route's hostnames are intersected with its listener's (a name outside
// the listener's wildcard is ignored), a name a more specific listener
// owns is left to it (isolation: the apps listener's db.apps.example,
// the HTTPS listener's shop.example), the TLS listeners' own hostnames
// are refused where no route serves them, and the HTTPS listener's
// hostname, which the catch-all TLS listener also matches, is
// terminated. Listener status: TLSRoute the one kind, attachedRoutes
// counting every route whose hostnames intersect.
func TestTLSRoute(t *testing.T) {
	snap := tlsSnap(t,
		tlsRouteDoc("default", "apps", "{name: gw, sectionName: apps}", `"*.apps.example", other.example`, "{name: apps, port: 80}")+
			tlsRouteDoc("default", "db", "{name: gw, port: 443}", "db.apps.example", "{name: db, port: 80}")+
			tlsRouteDoc("default", "steal", "{name: gw, sectionName: any}", "shop.example", "{name: apps, port: 80}")+
			tlsRouteDoc("default", "mismatch", "{name: gw, sectionName: apps}", "x.other.example", "{name: apps, port: 80}")+
			tlsRouteDoc("default", "late", "{name: gw, sectionName: apps}", "db.apps.example", "{name: apps, port: 80}"),
		"apps", "db")
	res := Translate(snap, gatewayOpts())
	for name, want := range map[string]string{"apps": "Accepted", "db": "Accepted", "steal": "Accepted", "late": "Accepted",
		"mismatch": string(gwv1.RouteReasonNoMatchingListenerHostname)} {
		acc, rr := tcpParent(t, res, tlsRef("default", name))
		if acc.Reason != want || (acc.Status == metav1.ConditionTrue) != (want == "Accepted") || rr.Status != metav1.ConditionTrue {
			t.Errorf("%s: Accepted %+v ResolvedRefs %+v, want %s", name, acc, rr, want)
		}
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers: %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	l443 := listenerOn(lb, 443)
	if l443 == nil || l443.Protocol != model.ProtocolTerminatedHTTPS || len(l443.Certificates) != 1 {
		t.Fatalf("listener 443: %+v", l443)
	}
	// db.apps.example is db's: the newer late names it too.
	want := []string{"db.apps.example>default_db_80_tcp", "*.apps.example>default_apps_80_tcp", ">refuse", "shop.example>terminate"}
	if got := passthroughOf(lb, l443); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("443 SNI routes %q, want %q", got, want)
	}
	if got := l443.ListenerHosts; len(got) != 0 {
		t.Errorf("443 listener hosts %q: one HTTPS listener has none to tell apart", got)
	}
	if got := gatewayRoute(t, lb, 443, gwRequest{host: "shop.example", path: "/"}); got != "404" {
		t.Errorf("HTTP on shop.example: %s, want 404 (no HTTPRoute)", got)
	}
	if l := listenerOn(lb, 8443); l == nil || strings.Join(passthroughOf(lb, l), " ") != ">refuse" || len(l.Certificates) != 0 {
		t.Errorf("listener 8443 without routes: %+v, want every SNI refused", l)
	}
	attached := map[string]int32{"shop": 0, "apps": 3, "any": 2, "alone": 0}
	for _, l := range res.Gateway.Gateways[gatewayRef("default", "gw")].Listeners {
		kinds := []string{}
		for _, k := range l.SupportedKinds {
			kinds = append(kinds, string(k.Kind))
		}
		wantKinds := "TLSRoute"
		if l.Name == "shop" {
			wantKinds = "HTTPRoute,GRPCRoute"
		}
		if strings.Join(kinds, ",") != wantKinds || l.AttachedRoutes != attached[string(l.Name)] {
			t.Errorf("listener %s: kinds %v attached %d, want %s and %d", l.Name, kinds, l.AttachedRoutes, wantKinds, attached[string(l.Name)])
		}
		if acc := findCondition(t, l.Conditions, string(gwv1.ListenerConditionAccepted)); acc.Status != metav1.ConditionTrue {
			t.Errorf("listener %s: %+v", l.Name, acc)
		}
	}
}

// TestTLSRouteNotAllowed: a TLSRoute on an HTTPS or HTTP listener, or on
// a TLS listener whose allowedRoutes take only its namespace, is not
// accepted (NotAllowedByListeners), nor an HTTPRoute on a TLS listener;
// a sectionName no listener has: NoMatchingParent.
func TestTLSRouteNotAllowed(t *testing.T) {
	docs := tlsRouteDoc("default", "on-https", "{name: gw, sectionName: shop}", "shop.example", "{name: apps, port: 80}") +
		tlsRouteDoc("shop", "other-ns", "{name: gw, namespace: default, sectionName: any}", "a.example", "{name: apps, port: 80}") +
		tlsRouteDoc("default", "no-section", "{name: gw, sectionName: nope}", "a.example", "{name: apps, port: 80}") + `
---
kind: HTTPRoute
metadata: {name: http-on-tls}
spec:
  parentRefs: [{name: gw, sectionName: apps}]
  rules: [{backendRefs: [{name: apps, port: 80}]}]
`
	res := Translate(tlsSnap(t, docs, "apps"), gatewayOpts())
	for ref, want := range map[model.ObjectRef]gwv1.RouteConditionReason{
		tlsRef("default", "on-https"):      gwv1.RouteReasonNotAllowedByListeners,
		tlsRef("shop", "other-ns"):         gwv1.RouteReasonNotAllowedByListeners,
		tlsRef("default", "no-section"):    gwv1.RouteReasonNoMatchingParent,
		routeRef("default", "http-on-tls"): gwv1.RouteReasonNotAllowedByListeners,
	} {
		acc, _ := tcpParent(t, res, ref)
		if acc.Status != metav1.ConditionFalse || acc.Reason != string(want) {
			t.Errorf("%s: %+v, want %s", ref.Name, acc, want)
		}
	}
	lb := res.LoadBalancers[0]
	if got := passthroughOf(lb, listenerOn(lb, 443)); strings.Join(got, " ") != "*.apps.example>refuse >refuse shop.example>terminate" {
		t.Errorf("443 SNI routes %q: nothing of the refused routes is served", got)
	}
}

// TestTLSRouteBackends: backendRefs resolve as a TCPRoute's. A Service in
// another namespace without a ReferenceGrant (RefNotPermitted) or one
// that does not exist (BackendNotFound) leaves the route accepted with
// its hostname refused; a ReferenceGrant from TLSRoutes permits the
// other namespace's.
func TestTLSRouteBackends(t *testing.T) {
	docs := tlsRouteDoc("default", "nogrant", "{name: gw, sectionName: any}", "a.example", "{name: db, namespace: data, port: 80}") +
		tlsRouteDoc("default", "missing", "{name: gw, sectionName: any}", "b.example", "{name: nope, port: 80}") +
		tlsRouteDoc("default", "granted", "{name: gw, sectionName: any}", "c.example", "{name: cache, namespace: data, port: 80}") + `
---
kind: ReferenceGrant
metadata: {name: tls, namespace: data}
spec:
  from: [{group: gateway.networking.k8s.io, kind: TLSRoute, namespace: default}]
  to: [{group: "", kind: Service, name: cache}]
`
	snap := tlsSnap(t, docs)
	withServices(snap, "data", "db", "cache")
	res := Translate(snap, gatewayOpts())
	for name, want := range map[string]gwv1.RouteConditionReason{
		"nogrant": gwv1.RouteReasonRefNotPermitted, "missing": gwv1.RouteReasonBackendNotFound, "granted": gwv1.RouteReasonResolvedRefs,
	} {
		acc, rr := tcpParent(t, res, tlsRef("default", name))
		if acc.Status != metav1.ConditionTrue || rr.Reason != string(want) {
			t.Errorf("%s: Accepted %+v ResolvedRefs %+v, want %s", name, acc, rr, want)
		}
	}
	lb := res.LoadBalancers[0]
	want := "a.example>refuse b.example>refuse c.example>data_cache_80_tcp *.apps.example>refuse >refuse shop.example>terminate"
	if got := passthroughOf(lb, listenerOn(lb, 443)); strings.Join(got, " ") != want {
		t.Errorf("443 SNI routes %q, want %q", got, want)
	}
}

// TestTLSRouteRefused: what pier refuses, with the reason, serving the
// rest: a TLSRoute with an invalid hostname or two rules
// (UnsupportedValue), a TLS listener in a tls.mode that is neither
// Terminate nor Passthrough (UnsupportedValue) or with certificateRefs in
// Passthrough (Invalid), a
// TLS listener on an HTTP listener's port (ProtocolConflict) or with an
// HTTPS listener's hostname on its port (HostnameConflict).
func TestTLSRouteRefused(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: ok, port: 443, protocol: TLS, tls: {mode: Passthrough}}
  - {name: terminate, port: 9443, protocol: TLS, tls: {mode: Decrypt, certificateRefs: [{name: shop-tls}]}}
  - {name: certs, port: 9444, protocol: TLS, tls: {mode: Passthrough, certificateRefs: [{name: shop-tls}]}}
  - {name: http, port: 80, protocol: HTTP}
  - {name: tls-on-80, port: 80, protocol: TLS, tls: {mode: Passthrough}}
  - {name: https-dup, port: 8443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: tls-dup, port: 8443, protocol: TLS, hostname: shop.example, tls: {mode: Passthrough}}
` + tlsRouteDoc("default", "badhost", "{name: gw, sectionName: ok}", `"a.example;evil"`, "{name: svc, port: 80}") + `
---
kind: TLSRoute
metadata: {name: tworules}
spec:
  parentRefs: [{name: gw, sectionName: ok}]
  hostnames: [b.example]
  rules: [{backendRefs: [{name: svc, port: 80}]}, {backendRefs: [{name: svc, port: 80}]}]
` + tlsRouteDoc("default", "good", "{name: gw, sectionName: ok}", "c.example", "{name: svc, port: 80}")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "shop-tls", "shop.example"))
	res := Translate(snap, gatewayOpts())
	for name, want := range map[string]string{"badhost": "UnsupportedValue", "tworules": "UnsupportedValue", "good": "Accepted"} {
		if acc, _ := tcpParent(t, res, tlsRef("default", name)); acc.Reason != want {
			t.Errorf("%s: %+v, want %s", name, acc, want)
		}
	}
	wantListener := map[string][2]string{
		"ok": {"Accepted", "NoConflicts"}, "terminate": {"UnsupportedValue", "NoConflicts"}, "certs": {"Invalid", "NoConflicts"},
		"http": {"Accepted", "ProtocolConflict"}, "tls-on-80": {"Accepted", "ProtocolConflict"},
		"https-dup": {"Accepted", "HostnameConflict"}, "tls-dup": {"Accepted", "HostnameConflict"},
	}
	for _, l := range res.Gateway.Gateways[gatewayRef("default", "gw")].Listeners {
		acc := findCondition(t, l.Conditions, string(gwv1.ListenerConditionAccepted))
		conf := findCondition(t, l.Conditions, string(gwv1.ListenerConditionConflicted))
		if w := wantListener[string(l.Name)]; acc.Reason != w[0] || conf.Reason != w[1] {
			t.Errorf("listener %s: Accepted %s Conflicted %s, want %v", l.Name, acc.Reason, conf.Reason, w)
		}
	}
	problems := map[string]bool{}
	for _, p := range res.Problems {
		problems[p.Kind+"/"+p.Name+"/"+p.Reason] = true
	}
	for _, want := range []string{"TLSRoute/badhost/UnsupportedValue", "TLSRoute/tworules/UnsupportedValue", "Gateway/gw/UnsupportedValue"} {
		if !problems[want] {
			t.Errorf("no problem %s in %+v", want, res.Problems)
		}
	}
	lb := res.LoadBalancers[0]
	if len(lb.Listeners) != 1 || strings.Join(passthroughOf(lb, &lb.Listeners[0]), " ") != "c.example>default_svc_80_tcp >refuse" {
		t.Errorf("listeners %+v, want 443 alone, serving c.example", lb.Listeners)
	}
}

// A Gateway's TLS listeners render: the SNI frontend with its exact and
// suffix maps, the refusing backend, the hand-off to the HTTPS
// listener's termination.
func TestGatewayTLSRender(t *testing.T) {
	snap := tlsSnap(t, tlsRouteDoc("default", "apps", "{name: gw, sectionName: apps}", `"*.apps.example"`, "{name: apps, port: 80}")+
		tlsRouteDoc("default", "db", "{name: gw, sectionName: any}", "db.example", "{name: db, port: 80}"), "apps", "db")
	lb := Translate(snap, translate.DefaultOptions()).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{"_443_sni from pier_tcp\n", ",map_end(", "tcp-request content reject\n", "default_backend pier_refuse_",
		"bind abns@pier-", "_8443_sni from pier_tcp\n"} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
	maps := map[string]string{}
	for _, m := range r.Maps {
		maps[m.Path] = string(m.Data)
	}
	var all []string
	for _, d := range maps {
		all = append(all, d)
	}
	joined := strings.Join(all, "")
	for _, want := range []string{"\n.apps.example be_", "db.example be_", "shop.example pier_tls_"} {
		if !strings.Contains("\n"+joined, want) {
			t.Errorf("no %q in the maps %q", want, joined)
		}
	}
}

// TestTLSRouteHostnamePrecedence: two TLSRoutes whose hostnames intersect
// a listener's into the same name are decided by the hostname each
// wrote, not by age: on a listener for abc.example.com the newer route
// for abc.example.com wins over the older one for *.example.com (both
// stay accepted).
func TestTLSRouteHostnamePrecedence(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: exact, port: 443, protocol: TLS, hostname: abc.example.com, tls: {mode: Passthrough}}
` + tlsRouteDoc("default", "older-wildcard", "{name: gw}", `"*.example.com"`, "{name: old, port: 80}") +
		tlsRouteDoc("default", "newer-exact", "{name: gw}", "abc.example.com", "{name: new, port: 80}")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "old", "new")
	res := Translate(snap, gatewayOpts())
	lb := res.LoadBalancers[0]
	if got := passthroughOf(lb, &lb.Listeners[0]); strings.Join(got, " ") != "abc.example.com>default_new_80_tcp" {
		t.Errorf("SNI routes %q, want abc.example.com to the newer exact route", got)
	}
	for _, name := range []string{"older-wildcard", "newer-exact"} {
		if acc, _ := tcpParent(t, res, tlsRef("default", name)); acc.Status != metav1.ConditionTrue {
			t.Errorf("%s: %+v", name, acc)
		}
	}
}
