package gatewayapi

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

func listenerSetRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindListenerSet, Namespace: ns, Name: name}
}

// listenerSetStatus returns a ListenerSet's status, failing when there is
// none.
func listenerSetStatus(t *testing.T, res *translate.Result, ns, name string) translate.ListenerSetStatus {
	t.Helper()
	st, ok := res.Gateway.ListenerSets[listenerSetRef(ns, name)]
	if !ok {
		t.Fatalf("ListenerSet %s/%s: no status; problems %+v", ns, name, res.Problems)
	}
	return st
}

func wantCondition(t *testing.T, what string, cs []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := findCondition(t, cs, typ)
	if c.Status != status || c.Reason != reason {
		t.Errorf("%s: %s %s/%s (%s), want %s/%s", what, typ, c.Status, c.Reason, c.Message, status, reason)
	}
}

func setListener(t *testing.T, st translate.ListenerSetStatus, name string) gwv1.ListenerStatus {
	t.Helper()
	for _, l := range st.Listeners {
		if string(l.Name) == name {
			return l
		}
	}
	t.Fatalf("no listener %s in %+v", name, st.Listeners)
	return gwv1.ListenerStatus{}
}

// routeParent returns a route's parent status for the parentRef of kind
// and name.
func routeParent(t *testing.T, res *translate.Result, route model.ObjectRef, kind, name string) gwv1.RouteParentStatus {
	t.Helper()
	for _, p := range res.Gateway.Routes[route] {
		k := model.KindGateway
		if p.ParentRef.Kind != nil {
			k = string(*p.ParentRef.Kind)
		}
		if k == kind && string(p.ParentRef.Name) == name {
			return p
		}
	}
	t.Fatalf("route %s: no parent %s %s in %+v", route, kind, name, res.Gateway.Routes[route])
	return gwv1.RouteParentStatus{}
}

const listenerSetMergeDocs = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  allowedListeners: {namespaces: {from: All}}
  listeners:
  - {name: web, port: 80, protocol: HTTP, hostname: gw.example}
---
kind: ListenerSet
metadata: {name: team, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: web, port: 80, protocol: HTTP, hostname: team.example}
  - {name: alt, port: 8080, protocol: HTTP, hostname: team.example}
---
kind: HTTPRoute
metadata: {name: gw-route}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: gw-svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: team-route, namespace: team}
spec:
  parentRefs: [{kind: ListenerSet, group: gateway.networking.k8s.io, name: team}]
  rules: [{backendRefs: [{name: team-svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: team-section, namespace: team}
spec:
  parentRefs: [{kind: ListenerSet, group: gateway.networking.k8s.io, name: team, sectionName: alt}]
  rules: [{matches: [{path: {value: /alt}}], backendRefs: [{name: team-svc, port: 80}]}]
`

// A ListenerSet's listeners join its Gateway's load balancer on their
// ports, but each object's routes are served on its own listeners only.
func TestListenerSetMergesIntoGateway(t *testing.T) {
	snap := gatewaySnap(t, listenerSetMergeDocs)
	withServices(snap, "default", "gw-svc")
	withServices(snap, "team", "team-svc")
	res := Translate(snap, gatewayOpts())
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers, want the Gateway's one; problems %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	var ports []int
	for _, l := range lb.Listeners {
		ports = append(ports, l.Port)
	}
	if !slices.Equal(ports, []int{80, 8080}) {
		t.Errorf("model listener ports %v, want [80 8080] (one per port, the ListenerSet's 8080 included)", ports)
	}
	for _, tc := range []struct {
		port       int
		host, path string
		want       string
	}{
		{80, "gw.example", "/", "gw-svc"},
		{80, "team.example", "/", "team-svc"},
		{8080, "team.example", "/", "team-svc"},
		{8080, "team.example", "/alt", "team-svc"},
		{8080, "gw.example", "/", "404"},
	} {
		if got := gatewayRoute(t, lb, tc.port, gwRequest{host: tc.host, path: tc.path, method: "GET"}); got != tc.want {
			t.Errorf("%s:%d%s: %s, want %s", tc.host, tc.port, tc.path, got, tc.want)
		}
	}
	// Only the Gateway's own listeners count in its status; the
	// ListenerSet's carry their attached routes in its own.
	gs := res.Gateway.Gateways[gatewayRef("default", "gw")]
	if len(gs.Listeners) != 1 || gs.Listeners[0].AttachedRoutes != 1 {
		t.Errorf("Gateway listeners %+v, want web only with 1 route", gs.Listeners)
	}
	if n := res.Gateway.AttachedListenerSets[gatewayRef("default", "gw")]; n != 1 {
		t.Errorf("attachedListenerSets %d, want 1", n)
	}
	st := listenerSetStatus(t, res, "team", "team")
	wantCondition(t, "ListenerSet", st.Conditions, listenerSetConditionAccepted, metav1.ConditionTrue, listenerSetReasonAccepted)
	wantCondition(t, "ListenerSet", st.Conditions, listenerSetConditionProgrammed, metav1.ConditionFalse, listenerSetReasonPending)
	if st.Gateway != gatewayRef("default", "gw") {
		t.Errorf("ListenerSet's Gateway %v", st.Gateway)
	}
	if web, alt := setListener(t, st, "web"), setListener(t, st, "alt"); web.AttachedRoutes != 1 || alt.AttachedRoutes != 2 {
		t.Errorf("attachedRoutes web %d alt %d, want 1 and 2", web.AttachedRoutes, alt.AttachedRoutes)
	}
	wantCondition(t, "team-route", routeParent(t, res, routeRef("team", "team-route"), model.KindListenerSet, "team").Conditions,
		string(gwv1.RouteConditionAccepted), metav1.ConditionTrue, string(gwv1.RouteReasonAccepted))
	ports = nil
	for _, p := range res.Gateway.Infrastructure[gatewayRef("default", "gw")].Ports {
		ports = append(ports, int(p.Port))
	}
	if !slices.Equal(ports, []int{80, 8080}) {
		t.Errorf("published Service ports %v, want [80 8080]", ports)
	}
}

// spec.allowedListeners decides which ListenerSets a Gateway takes: none
// when unset or None, its own namespace's for Same, those of the
// namespaces a selector picks.
func TestListenerSetAllowedListeners(t *testing.T) {
	docs := func(allowed string) string {
		return gatewayClassDoc + `
---
kind: Namespace
metadata: {name: picked, labels: {team: blue}}
---
kind: Namespace
metadata: {name: other}
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  ` + allowed + `
  listeners: [{name: web, port: 80, protocol: HTTP, hostname: gw.example}]
---
kind: ListenerSet
metadata: {name: same}
spec:
  parentRef: {name: gw}
  listeners: [{name: l, port: 80, protocol: HTTP, hostname: same.example}]
---
kind: ListenerSet
metadata: {name: picked, namespace: picked}
spec:
  parentRef: {name: gw, namespace: default}
  listeners: [{name: l, port: 80, protocol: HTTP, hostname: picked.example}]
---
kind: ListenerSet
metadata: {name: other, namespace: other}
spec:
  parentRef: {name: gw, namespace: default}
  listeners: [{name: l, port: 80, protocol: HTTP, hostname: other.example}]
`
	}
	for _, tc := range []struct {
		name, allowed string
		accepted      []string // of same, picked, other
	}{
		{"unset", "", nil},
		{"None", "allowedListeners: {namespaces: {from: None}}", nil},
		{"Same", "allowedListeners: {namespaces: {from: Same}}", []string{"same"}},
		{"Selector", "allowedListeners: {namespaces: {from: Selector, selector: {matchLabels: {team: blue}}}}", []string{"picked"}},
		{"All", "allowedListeners: {namespaces: {from: All}}", []string{"same", "picked", "other"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(gatewaySnap(t, docs(tc.allowed)), gatewayOpts())
			for _, ref := range []model.ObjectRef{listenerSetRef("default", "same"), listenerSetRef("picked", "picked"), listenerSetRef("other", "other")} {
				st := listenerSetStatus(t, res, ref.Namespace, ref.Name)
				if slices.Contains(tc.accepted, ref.Name) {
					wantCondition(t, ref.String(), st.Conditions, listenerSetConditionAccepted, metav1.ConditionTrue, listenerSetReasonAccepted)
					continue
				}
				wantCondition(t, ref.String(), st.Conditions, listenerSetConditionAccepted, metav1.ConditionFalse, listenerSetReasonNotAllowed)
				wantCondition(t, ref.String(), st.Conditions, listenerSetConditionProgrammed, metav1.ConditionFalse, listenerSetReasonNotAllowed)
			}
			if n := res.Gateway.AttachedListenerSets[gatewayRef("default", "gw")]; n != int32(len(tc.accepted)) {
				t.Errorf("attachedListenerSets %d, want %d", n, len(tc.accepted))
			}
			// A refused ListenerSet's listeners are not parsed, so none has a
			// status; an accepted one's are listed.
			for _, name := range []string{"same", "picked", "other"} {
				ns := name
				if name == "same" {
					ns = "default"
				}
				st := listenerSetStatus(t, res, ns, name)
				if got, want := len(st.Listeners), 0; slices.Contains(tc.accepted, name) == (got == want) {
					t.Errorf("%s: %d listener statuses", name, got)
				}
			}
		})
	}
}

const listenerSetConflictDocs = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  allowedListeners: {namespaces: {from: Same}}
  listeners:
  - {name: web, port: 80, protocol: HTTP, hostname: gw.example}
---
kind: ListenerSet
metadata: {name: a-older}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: own, port: 80, protocol: HTTP, hostname: a.example}
  - {name: dup-gw, port: 80, protocol: HTTP, hostname: gw.example}
  - {name: tcp, port: 80, protocol: TCP}
  - {name: shared, port: 80, protocol: HTTP, hostname: shared.example}
---
kind: ListenerSet
metadata: {name: b-newer}
spec:
  parentRef: {name: gw}
  listeners:
  - {name: shared, port: 80, protocol: HTTP, hostname: shared.example}
`

// Conflicts follow the spec's precedence: the Gateway's listeners, then
// older ListenerSets, then earlier listeners of the same one. The
// listener that comes later is refused; the earlier keeps serving.
func TestListenerSetConflicts(t *testing.T) {
	snap := gatewaySnap(t, listenerSetConflictDocs)
	res := Translate(snap, gatewayOpts())
	gs := res.Gateway.Gateways[gatewayRef("default", "gw")]
	wantCondition(t, "Gateway listener web", gs.Listeners[0].Conditions, string(gwv1.ListenerConditionConflicted), metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts))
	wantCondition(t, "Gateway listener web", gs.Listeners[0].Conditions, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))

	older := listenerSetStatus(t, res, "default", "a-older")
	wantCondition(t, "a-older", older.Conditions, listenerSetConditionAccepted, metav1.ConditionTrue, listenerSetReasonAccepted)
	for name, reason := range map[string]gwv1.ListenerConditionReason{
		"dup-gw": gwv1.ListenerReasonHostnameConflict,
		"tcp":    gwv1.ListenerReasonProtocolConflict,
	} {
		cs := setListener(t, older, name).Conditions
		wantCondition(t, name, cs, string(gwv1.ListenerConditionAccepted), metav1.ConditionFalse, string(reason))
		wantCondition(t, name, cs, string(gwv1.ListenerConditionProgrammed), metav1.ConditionFalse, string(reason))
		wantCondition(t, name, cs, string(gwv1.ListenerConditionConflicted), metav1.ConditionTrue, string(reason))
	}
	for _, name := range []string{"own", "shared"} {
		cs := setListener(t, older, name).Conditions
		wantCondition(t, name, cs, string(gwv1.ListenerConditionAccepted), metav1.ConditionTrue, string(gwv1.ListenerReasonAccepted))
		wantCondition(t, name, cs, string(gwv1.ListenerConditionConflicted), metav1.ConditionFalse, string(gwv1.ListenerReasonNoConflicts))
	}

	// The newer ListenerSet's only listener lost: it is not accepted.
	newer := listenerSetStatus(t, res, "default", "b-newer")
	wantCondition(t, "b-newer", newer.Conditions, listenerSetConditionAccepted, metav1.ConditionFalse, listenerSetReasonListenersNotValid)
	wantCondition(t, "b-newer", newer.Conditions, listenerSetConditionProgrammed, metav1.ConditionFalse, listenerSetReasonListenersNotValid)
	wantCondition(t, "b-newer shared", setListener(t, newer, "shared").Conditions, string(gwv1.ListenerConditionConflicted),
		metav1.ConditionTrue, string(gwv1.ListenerReasonHostnameConflict))
	if n := res.Gateway.AttachedListenerSets[gatewayRef("default", "gw")]; n != 1 {
		t.Errorf("attachedListenerSets %d, want 1", n)
	}
	// The load balancer has no TCP listener and one HTTP on 80.
	lb := res.LoadBalancers[0]
	if len(lb.Listeners) != 1 || lb.Listeners[0].Protocol != model.ProtocolHTTP {
		t.Errorf("listeners %+v, want one HTTP on 80", lb.Listeners)
	}
}

// A route reaches a ListenerSet's listeners only through a parentRef
// naming the ListenerSet, and allowedRoutes "Same" there means the
// ListenerSet's namespace; a refused ListenerSet takes no route.
func TestListenerSetRouteAttachment(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  allowedListeners: {namespaces: {from: All}}
  listeners: [{name: web, port: 80, protocol: HTTP, hostname: gw.example, allowedRoutes: {namespaces: {from: All}}}]
---
kind: ListenerSet
metadata: {name: team, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners: [{name: team-l, port: 80, protocol: HTTP, hostname: team.example}]
---
kind: ListenerSet
metadata: {name: broken, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners: [{name: dup, port: 80, protocol: HTTP, hostname: gw.example}]
---
kind: HTTPRoute
metadata: {name: by-gateway-section}
spec:
  parentRefs: [{name: gw, sectionName: team-l}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: in-gateway-ns}
spec:
  parentRefs: [{kind: ListenerSet, name: team, namespace: team}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: in-set-ns, namespace: team}
spec:
  parentRefs: [{kind: ListenerSet, name: team}, {name: gw, namespace: default}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
---
kind: HTTPRoute
metadata: {name: to-broken, namespace: team}
spec:
  parentRefs: [{kind: ListenerSet, name: broken}]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	withServices(snap, "team", "svc")
	res := Translate(snap, gatewayOpts())
	for _, tc := range []struct {
		route      model.ObjectRef
		kind, name string
		status     metav1.ConditionStatus
		reason     gwv1.RouteConditionReason
	}{
		// A Gateway parentRef's sectionName never finds a ListenerSet's listener.
		{routeRef("default", "by-gateway-section"), model.KindGateway, "gw", metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent},
		{routeRef("default", "in-gateway-ns"), model.KindListenerSet, "team", metav1.ConditionFalse, gwv1.RouteReasonNotAllowedByListeners},
		{routeRef("team", "in-set-ns"), model.KindListenerSet, "team", metav1.ConditionTrue, gwv1.RouteReasonAccepted},
		{routeRef("team", "in-set-ns"), model.KindGateway, "gw", metav1.ConditionTrue, gwv1.RouteReasonAccepted},
		{routeRef("team", "to-broken"), model.KindListenerSet, "broken", metav1.ConditionFalse, gwv1.RouteReasonNoMatchingParent},
	} {
		p := routeParent(t, res, tc.route, tc.kind, tc.name)
		wantCondition(t, tc.route.String()+" on "+tc.kind+" "+tc.name, p.Conditions, string(gwv1.RouteConditionAccepted), tc.status, string(tc.reason))
	}
	lb := res.LoadBalancers[0]
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "team.example", path: "/", method: "GET"}); got != "svc" {
		t.Errorf("team.example: %s, want svc", got)
	}
	st := listenerSetStatus(t, res, "team", "team")
	if l := setListener(t, st, "team-l"); l.AttachedRoutes != 1 {
		t.Errorf("team-l attachedRoutes %d, want 1 (in-set-ns only)", l.AttachedRoutes)
	}
}

// A ListenerSet's certificateRefs are its own: a Secret of another
// namespace needs a ReferenceGrant for ListenerSets of its namespace (the
// Gateway's grant does not count), and a ListenerSet whose only listener
// cannot resolve its certificate is not accepted. Listener filters, which
// pier does not support, refuse the listener. A refused Gateway refuses
// its ListenerSets.
func TestListenerSetRefusals(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  allowedListeners: {namespaces: {from: All}}
  listeners: [{name: web, port: 80, protocol: HTTP}]
---
kind: ReferenceGrant
metadata: {name: for-gateways, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: team}]
  to: [{group: "", kind: Secret}]
---
kind: ReferenceGrant
metadata: {name: for-sets, namespace: certs}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ListenerSet, namespace: granted}]
  to: [{group: "", kind: Secret}]
---
kind: ListenerSet
metadata: {name: granted, namespace: granted}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: tls, port: 443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls, namespace: certs}]}}
---
kind: ListenerSet
metadata: {name: ungranted, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: tls, port: 443, protocol: HTTPS, hostname: other.example, tls: {certificateRefs: [{name: shop-tls, namespace: certs}]}}
---
kind: ListenerSet
metadata: {name: filtered, namespace: team}
spec:
  parentRef: {name: gw, namespace: default}
  listeners:
  - {name: f, port: 80, protocol: HTTP, hostname: f.example, filters: {request: [{type: ExternalAuth}]}}
---
kind: Gateway
metadata: {name: refused}
spec:
  gatewayClassName: pier
  allowedListeners: {namespaces: {from: All}}
  listeners: [{name: bad, port: 80, protocol: SCTP}]
---
kind: ListenerSet
metadata: {name: orphan}
spec:
  parentRef: {name: refused}
  listeners: [{name: l, port: 80, protocol: HTTP}]
`
	snap := gatewaySnap(t, docs)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "certs", "shop-tls", "shop.example", "other.example"))
	res := Translate(snap, gatewayOpts())

	granted := listenerSetStatus(t, res, "granted", "granted")
	wantCondition(t, "granted", granted.Conditions, listenerSetConditionAccepted, metav1.ConditionTrue, listenerSetReasonAccepted)
	wantCondition(t, "granted tls", setListener(t, granted, "tls").Conditions, string(gwv1.ListenerConditionResolvedRefs),
		metav1.ConditionTrue, string(gwv1.ListenerReasonResolvedRefs))

	ungranted := listenerSetStatus(t, res, "team", "ungranted")
	wantCondition(t, "ungranted", ungranted.Conditions, listenerSetConditionAccepted, metav1.ConditionFalse, listenerSetReasonListenersNotValid)
	wantCondition(t, "ungranted tls", setListener(t, ungranted, "tls").Conditions, string(gwv1.ListenerConditionResolvedRefs),
		metav1.ConditionFalse, string(gwv1.ListenerReasonRefNotPermitted))

	filtered := listenerSetStatus(t, res, "team", "filtered")
	wantCondition(t, "filtered", filtered.Conditions, listenerSetConditionAccepted, metav1.ConditionFalse, listenerSetReasonListenersNotValid)
	wantCondition(t, "filtered f", setListener(t, filtered, "f").Conditions, string(gwv1.ListenerConditionAccepted),
		metav1.ConditionFalse, string(reasonUnsupportedValue))

	orphan := listenerSetStatus(t, res, "default", "orphan")
	wantCondition(t, "orphan", orphan.Conditions, listenerSetConditionAccepted, metav1.ConditionFalse, listenerSetReasonParentNotAccepted)

	// The granted ListenerSet's HTTPS listener is served with its
	// certificate on the Gateway's load balancer; the others add nothing.
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.Name == "gateway:default/gw" {
			lb = l
		}
	}
	if lb == nil {
		t.Fatalf("no load balancer for gw; problems %+v", res.Problems)
	}
	var https *model.Listener
	for i := range lb.Listeners {
		if lb.Listeners[i].Port == 443 {
			https = &lb.Listeners[i]
		}
	}
	if https == nil || len(https.Certificates) != 1 || !slices.Equal(https.Certificates[0].Hosts, []string{"shop.example"}) {
		t.Errorf("port 443 %+v, want the granted certificate for shop.example", https)
	}
	for _, want := range []model.ObjectRef{listenerSetRef("team", "ungranted"), listenerSetRef("team", "filtered"), listenerSetRef("default", "orphan")} {
		found := false
		for _, pr := range res.Problems {
			if pr.Kind == model.KindListenerSet && pr.Namespace == want.Namespace && pr.Name == want.Name && pr.Severity == model.SeverityError {
				found = true
			}
		}
		if !found {
			t.Errorf("no Error problem for %s", want)
		}
	}
}
