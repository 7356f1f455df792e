package gatewayapi

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// udpGatewayDoc: HTTP on 80, TCP on 53 and UDP on 53 (DNS: one port
// number, two transport protocols), and a second UDP listener.
const udpGatewayDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: dns-tcp, port: 53, protocol: TCP}
  - {name: dns, port: 53, protocol: UDP, allowedRoutes: {namespaces: {from: All}}}
  - {name: syslog, port: 514, protocol: UDP}
`

func udpRef(ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: model.KindUDPRoute, Namespace: ns, Name: name}
}

func udpRouteDoc(ns, name, parent, refs string) string {
	return `
---
kind: UDPRoute
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  parentRefs: [` + parent + `]
  rules: [{backendRefs: [` + refs + `]}]
`
}

// withUDPService adds a Service of one UDP port 53 with an endpoint per
// address, on target port 5353.
func withUDPService(snap *source.Snapshot, ns, name string, addrs ...string) {
	udp := corev1.ProtocolUDP
	snap.Services = append(snap.Services, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: udp}}},
	})
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptrTo("dns"), Port: ptrTo(int32(5353)), Protocol: &udp}},
	}
	for _, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	snap.EndpointSlices = append(snap.EndpointSlices, es)
}

func udpParent(t *testing.T, res *translate.Result, ref model.ObjectRef) (accepted, resolved metav1.Condition) {
	t.Helper()
	parents := res.Gateway.Routes[ref]
	if len(parents) != 1 {
		t.Fatalf("%s: parent statuses %+v", ref.Name, parents)
	}
	return findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted)),
		findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionResolvedRefs))
}

func udpListenerOn(lb *model.LoadBalancer, port int) *model.Listener {
	for i := range lb.Listeners {
		if lb.Listeners[i].Port == port && lb.Listeners[i].Protocol == model.ProtocolUDP {
			return &lb.Listeners[i]
		}
	}
	return nil
}

// TestUDPRoute: a UDPRoute on a UDP listener is accepted and becomes a
// UDP listener of the Gateway's own load balancer (one VIP and FIP for
// HTTP, TCP and UDP), its pool the Service's UDP endpoints on the target
// port; UDP 53 and TCP 53 do not conflict; the listener without a route
// is served with no pool (refused); the listener statuses say what they
// take and count.
func TestUDPRoute(t *testing.T) {
	snap := gatewaySnap(t, udpGatewayDoc+udpRouteDoc("default", "dns", "{name: gw, sectionName: dns}", "{name: coredns, port: 53}"))
	withUDPService(snap, "default", "coredns", "10.1.0.1", "10.1.0.2")
	res := Translate(snap, gatewayOpts())
	acc, rr := udpParent(t, res, udpRef("default", "dns"))
	if acc.Status != metav1.ConditionTrue || rr.Status != metav1.ConditionTrue {
		t.Fatalf("Accepted %+v ResolvedRefs %+v", acc, rr)
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("%d load balancers: one Gateway is one load balancer", len(res.LoadBalancers))
	}
	lb := res.LoadBalancers[0]
	dns := udpListenerOn(lb, 53)
	if dns == nil || dns.DefaultPoolID == "" || len(dns.Policies) != 0 {
		t.Fatalf("UDP 53: %+v", dns)
	}
	if tcp := listenerOn(lb, 53); tcp == nil || tcp.Protocol != model.ProtocolTCP {
		t.Fatalf("TCP 53 beside UDP 53: %+v", lb.Listeners)
	}
	if syslog := udpListenerOn(lb, 514); syslog == nil || syslog.DefaultPoolID != "" {
		t.Fatalf("UDP 514 without a route: %+v", syslog)
	}
	var pool *model.Pool
	for i := range lb.Pools {
		if lb.Pools[i].ID == dns.DefaultPoolID {
			pool = &lb.Pools[i]
		}
	}
	if pool == nil || len(pool.Members) != 2 || pool.Members[0].Address != "10.1.0.1" || pool.Members[0].Port != 5353 {
		t.Fatalf("pool: %+v", pool)
	}
	for _, ls := range res.Gateway.Gateways[model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}].Listeners {
		conflicted := meta(ls.Conditions, string(gwv1.ListenerConditionConflicted))
		if conflicted.Status != metav1.ConditionFalse {
			t.Errorf("listener %s: %+v", ls.Name, conflicted)
		}
		switch ls.Name {
		case "dns":
			if len(ls.SupportedKinds) != 1 || ls.SupportedKinds[0].Kind != model.KindUDPRoute || ls.AttachedRoutes != 1 {
				t.Errorf("dns: kinds %+v attached %d", ls.SupportedKinds, ls.AttachedRoutes)
			}
		case "syslog":
			if ls.AttachedRoutes != 0 {
				t.Errorf("syslog attached %d", ls.AttachedRoutes)
			}
		case "http":
			for _, k := range ls.SupportedKinds {
				if k.Kind == model.KindUDPRoute {
					t.Errorf("http takes UDPRoute")
				}
			}
		}
	}
}

func meta(cs []metav1.Condition, typ string) metav1.Condition {
	for _, c := range cs {
		if c.Type == typ {
			return c
		}
	}
	return metav1.Condition{}
}

// TestUDPRouteRefusals: each way a UDPRoute is not served, with its
// reason on the parent and nothing of it in the load balancer.
func TestUDPRouteRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, doc           string
		accepted            bool
		reason, resolvedWhy string
		pooled              bool
	}{
		{name: "http listener", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: http}", "{name: coredns, port: 53}"),
			reason: string(gwv1.RouteReasonNotAllowedByListeners), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "tcp listener", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns-tcp}", "{name: coredns, port: 53}"),
			reason: string(gwv1.RouteReasonNotAllowedByListeners), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "other namespace, Same", doc: udpRouteDoc("other", "r", "{name: gw, namespace: default, sectionName: syslog}", "{name: coredns, port: 53}"),
			reason: string(gwv1.RouteReasonNotAllowedByListeners), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "missing service", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: nope, port: 53}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonBackendNotFound)},
		{name: "tcp port only", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, port: 80}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonBackendNotFound)},
		{name: "no grant", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, namespace: other, port: 53}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonRefNotPermitted)},
		{name: "grant for TCPRoutes only", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, namespace: other, port: 53}") + grantDoc("TCPRoute"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonRefNotPermitted)},
		{name: "grant", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, namespace: other, port: 53}") + grantDoc("UDPRoute"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonResolvedRefs), pooled: true},
		{name: "seventeen refs", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", strings.TrimSuffix(strings.Repeat("{name: coredns, port: 53}, ", 17), ", ")),
			reason: string(gwv1.RouteReasonUnsupportedValue), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "two refs, both weight zero", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, port: 53, weight: 0}, {name: coredns, port: 53, weight: 0}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "two refs, neither resolves", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: nope, port: 53}, {name: coredns, port: 80}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonBackendNotFound)},
		{name: "weight zero", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: coredns, port: 53, weight: 0}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
		{name: "not a service", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{group: example.com, kind: Thing, name: coredns, port: 53}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonInvalidKind)},
		{name: "hostile name", doc: udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", "{name: \"coredns;evil\", port: 53}"),
			accepted: true, reason: string(gwv1.RouteReasonAccepted), resolvedWhy: string(gwv1.RouteReasonBackendNotFound)},
		{name: "two rules", doc: `
---
kind: UDPRoute
metadata: {name: r}
spec:
  parentRefs: [{name: gw, sectionName: dns}]
  rules: [{backendRefs: [{name: coredns, port: 53}]}, {backendRefs: [{name: coredns, port: 53}]}]
`, reason: string(gwv1.RouteReasonUnsupportedValue), resolvedWhy: string(gwv1.RouteReasonResolvedRefs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, udpGatewayDoc+tc.doc)
			withUDPService(snap, "default", "coredns", "10.1.0.1")
			withUDPService(snap, "other", "coredns", "10.2.0.1")
			res := Translate(snap, gatewayOpts())
			var ref model.ObjectRef
			for r := range res.Gateway.Routes {
				ref = r
			}
			acc, rr := udpParent(t, res, ref)
			if (acc.Status == metav1.ConditionTrue) != tc.accepted || acc.Reason != tc.reason {
				t.Fatalf("Accepted %+v, want %v %s", acc, tc.accepted, tc.reason)
			}
			if rr.Reason != tc.resolvedWhy {
				t.Fatalf("ResolvedRefs %+v, want %s", rr, tc.resolvedWhy)
			}
			if acc.Reason != string(gwv1.RouteReasonAccepted) && acc.Message == "" {
				t.Fatalf("a refusal without a message: %+v", acc)
			}
			lb := res.LoadBalancers[0]
			pooled := false
			for _, l := range lb.Listeners {
				if l.Protocol == model.ProtocolUDP && l.DefaultPoolID != "" {
					pooled = true
				}
			}
			if pooled != tc.pooled {
				t.Fatalf("a UDP listener with a pool: %v, want %v: %+v", pooled, tc.pooled, lb.Listeners)
			}
			for _, p := range lb.Pools {
				if strings.Contains(p.Name, "evil") || strings.Contains(p.Service, ";") {
					t.Fatalf("a hostile name reached the model: %+v", p)
				}
			}
		})
	}
}

func grantDoc(fromKind string) string {
	return `
---
kind: ReferenceGrant
metadata: {name: g, namespace: other}
spec:
  from: [{group: gateway.networking.k8s.io, kind: ` + fromKind + `, namespace: default}]
  to: [{group: "", kind: Service}]
`
}

// TestUDPRouteListenerInUse: a UDP listener serves the oldest UDPRoute;
// a newer one is Accepted there but not served, which its message and a
// Warning (ListenerInUse) say, and is still counted.
func TestUDPRouteListenerInUse(t *testing.T) {
	snap := gatewaySnap(t, udpGatewayDoc+
		udpRouteDoc("default", "first", "{name: gw, sectionName: dns}", "{name: coredns, port: 53}")+
		udpRouteDoc("default", "second", "{name: gw, sectionName: dns}", "{name: other, port: 53}"))
	withUDPService(snap, "default", "coredns", "10.1.0.1")
	withUDPService(snap, "default", "other", "10.1.0.9")
	res := Translate(snap, gatewayOpts())
	if acc, _ := udpParent(t, res, udpRef("default", "first")); acc.Status != metav1.ConditionTrue {
		t.Fatalf("first: %+v", acc)
	}
	if acc, _ := udpParent(t, res, udpRef("default", "second")); acc.Status != metav1.ConditionTrue ||
		!strings.Contains(acc.Message, "not served: the older UDPRoute default/first") {
		t.Fatalf("second: %+v", acc)
	}
	if !slices.ContainsFunc(res.Problems, func(p model.Problem) bool {
		return p.Name == "second" && p.Reason == reasonListenerInUse && p.Severity == model.SeverityWarning
	}) {
		t.Fatalf("no ListenerInUse Warning for the newer route: %+v", res.Problems)
	}
	dns := udpListenerOn(res.LoadBalancers[0], 53)
	for _, p := range res.LoadBalancers[0].Pools {
		if p.ID == dns.DefaultPoolID && p.Service != "coredns" {
			t.Fatalf("the listener serves %s", p.Service)
		}
	}
	for _, ls := range res.Gateway.Gateways[model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}].Listeners {
		if ls.Name == "dns" && ls.AttachedRoutes != 2 {
			t.Fatalf("dns attached %d", ls.AttachedRoutes)
		}
	}
}

// TestUDPListenerRefusals: what a UDP listener may not carry, and two on
// one port.
func TestUDPListenerRefusals(t *testing.T) {
	for _, tc := range []struct{ name, listeners, bad, reason string }{
		{"hostname", `[{name: u, port: 53, protocol: UDP, hostname: a.example}, {name: h, port: 80, protocol: HTTP}]`, "u", string(gwv1.ListenerReasonInvalid)},
		{"kinds", `[{name: u, port: 53, protocol: UDP, allowedRoutes: {kinds: [{kind: HTTPRoute}]}}]`, "u", string(gwv1.ListenerReasonInvalidRouteKinds)},
		{"same port", `[{name: u, port: 53, protocol: UDP}, {name: v, port: 53, protocol: UDP}]`, "v", string(gwv1.ListenerReasonHostnameConflict)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, gatewayClassDoc+`
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners: `+tc.listeners+`
`)
			res := Translate(snap, gatewayOpts())
			for _, ls := range res.Gateway.Gateways[model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}].Listeners {
				if string(ls.Name) != tc.bad {
					continue
				}
				for _, c := range ls.Conditions {
					if c.Reason == tc.reason {
						return
					}
				}
				t.Fatalf("listener %s: %+v, want a condition with reason %s", ls.Name, ls.Conditions, tc.reason)
			}
			t.Fatalf("no listener %s", tc.bad)
		})
	}
}

// TestUDPRouteWeights: a UDPRoute of several weighted backendRefs is one
// pool whose members weigh their Service's weight over its endpoint
// count (exact integers), a ref of weight 0 has no member, and the share
// of refs that do not resolve or whose Service has no endpoint is the
// pool's fail share (refused, not given to the others), as the spec's
// UDPRouteRule.backendRefs asks.
func TestUDPRouteWeights(t *testing.T) {
	type member struct {
		addr   string
		weight int
	}
	for _, tc := range []struct {
		name, refs       string
		members          []member // nil: no pool
		fail, failTotal  int
		servicePool      bool // the Service's own pool, as for one ref
		resolved, reason string
	}{
		{name: "70/30/0", refs: "{name: v1, port: 53, weight: 70}, {name: v2, port: 53, weight: 30}, {name: v3, port: 53, weight: 0}",
			members: []member{{"10.1.0.1", 70}, {"10.1.0.2", 70}, {"10.2.0.1", 60}}},
		{name: "no endpoints: its share refused", refs: "{name: v1, port: 53, weight: 70}, {name: empty, port: 53, weight: 30}",
			members: []member{{"10.1.0.1", 70}, {"10.1.0.2", 70}}, fail: 30, failTotal: 100},
		{name: "not found: its share refused", refs: "{name: v1, port: 53, weight: 70}, {name: nope, port: 53, weight: 30}",
			members: []member{{"10.1.0.1", 70}, {"10.1.0.2", 70}}, fail: 30, failTotal: 100, reason: string(gwv1.RouteReasonBackendNotFound)},
		{name: "the other weighs 0", refs: "{name: v1, port: 53}, {name: v2, port: 53, weight: 0}",
			members: []member{{"10.1.0.1", 1}, {"10.1.0.2", 1}}, servicePool: true},
		{name: "one Service twice", refs: "{name: v1, port: 53, weight: 1}, {name: v1, port: 53, weight: 3}",
			members: []member{{"10.1.0.1", 4}, {"10.1.0.2", 4}}},
		{name: "none with endpoints", refs: "{name: empty, port: 53}, {name: nope, port: 53}", reason: string(gwv1.RouteReasonBackendNotFound)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, udpGatewayDoc+udpRouteDoc("default", "r", "{name: gw, sectionName: dns}", tc.refs))
			withUDPService(snap, "default", "v1", "10.1.0.1", "10.1.0.2")
			withUDPService(snap, "default", "v2", "10.2.0.1")
			withUDPService(snap, "default", "v3", "10.3.0.1")
			withUDPService(snap, "default", "empty")
			res := Translate(snap, gatewayOpts())
			acc, rr := udpParent(t, res, udpRef("default", "r"))
			want := tc.reason
			if want == "" {
				want = string(gwv1.RouteReasonResolvedRefs)
			}
			if acc.Status != metav1.ConditionTrue || rr.Reason != want {
				t.Fatalf("Accepted %+v ResolvedRefs %+v, want accepted and %s", acc, rr, want)
			}
			lb := res.LoadBalancers[0]
			dns := udpListenerOn(lb, 53)
			var pool *model.Pool
			for i := range lb.Pools {
				if dns.DefaultPoolID != "" && lb.Pools[i].ID == dns.DefaultPoolID {
					pool = &lb.Pools[i]
				}
			}
			if tc.members == nil {
				if dns.DefaultPoolID != "" {
					t.Fatalf("a pool where every flow is refused: %+v", pool)
				}
				return
			}
			if pool == nil {
				t.Fatalf("no pool for %+v", dns)
			}
			var got []member
			for _, m := range pool.Members {
				got = append(got, member{m.Address, m.Weight})
			}
			if !slices.Equal(got, tc.members) || pool.FailWeight != tc.fail || pool.FailTotal != tc.failTotal {
				t.Fatalf("members %v fail %d of %d, want %v and %d of %d", got, pool.FailWeight, pool.FailTotal, tc.members, tc.fail, tc.failTotal)
			}
			if own := pool.ID == model.ID("udp-pool", "default", "v1", "udp-53"); own != tc.servicePool {
				t.Fatalf("pool %s: the Service's own %v, want %v", pool.ID, own, tc.servicePool)
			}
			if tc.reason != "" {
				found := false
				for _, p := range res.Problems {
					found = found || (p.Name == "r" && strings.Contains(p.Message, "its share"))
				}
				if !found {
					t.Fatalf("no problem says the unresolved ref's share is refused: %+v", res.Problems)
				}
			}
		})
	}
}
