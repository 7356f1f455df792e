package pipeline

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// gatewayWorld is world() plus a class of ours, a Gateway with one HTTP
// listener, a route it takes and one whose parentRef names no listener.
func gatewayWorld() *source.Snapshot {
	s := world()
	s.GatewayClasses = []*gwv1.GatewayClass{{ObjectMeta: metav1.ObjectMeta{Name: "pier", Generation: 1},
		Spec: gwv1.GatewayClassSpec{ControllerName: translate.DefaultGatewayControllerName}}}
	s.Gateways = []*gwv1.Gateway{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gw", UID: "22222222-2222-2222-2222-222222222222", Generation: 1},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier", Listeners: []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}}}}
	route := func(name string, section string) *gwv1.HTTPRoute {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 3}}
		r.Spec.ParentRefs = []gwv1.ParentReference{{Name: "gw", SectionName: ptr(gwv1.SectionName(section))}}
		r.Spec.Hostnames = []gwv1.Hostname{"gw.example.com"}
		r.Spec.Rules = []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
			BackendObjectReference: gwv1.BackendObjectReference{Name: "web", Port: ptr(gwv1.PortNumber(80))}}}}}}
		return r
	}
	s.HTTPRoutes = []*gwv1.HTTPRoute{route("web", "http"), route("lost", "nope")}
	return s
}

// The API and the web view read the Gateway API status the last pass
// computed, the load balancer each Gateway became, and route parents.
func TestGatewayView(t *testing.T) {
	h := newHarness(t)
	if h.p.Gateways() != nil {
		t.Fatal("Gateways before the first snapshot must be nil (not known)")
	}
	h.offer(gatewayWorld())
	gws := h.p.Gateways()
	if len(gws) != 1 || gws[0].LoadBalancer == "" || gws[0].Gateway.Kind != "Gateway" {
		t.Fatalf("gateways: %+v", gws)
	}
	st := gws[0].Gateway.Status
	if len(st.Listeners) != 1 || st.Listeners[0].AttachedRoutes != 1 {
		t.Fatalf("listeners: %+v", st.Listeners)
	}
	if c := findCondition(st.Conditions, "Accepted"); c == nil || c.Status != metav1.ConditionTrue || c.LastTransitionTime.IsZero() {
		t.Errorf("Accepted: %+v", c)
	}
	if c := findCondition(st.Conditions, "Programmed"); c == nil || c.Reason != "Pending" {
		t.Errorf("no agent reported: Programmed must be Pending: %+v", c)
	}
	routes := h.p.HTTPRoutes()
	if len(routes) != 2 || routes[0].Route.Name != "lost" || routes[1].Route.Name != "web" {
		t.Fatalf("routes: %+v", routes)
	}
	lost := routes[0].Route.Status.Parents
	if len(lost) != 1 {
		t.Fatalf("lost parents: %+v", lost)
	}
	if c := findCondition(lost[0].Conditions, "Accepted"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoMatchingParent" || c.ObservedGeneration != 3 {
		t.Errorf("lost Accepted: %+v", c)
	}
	if r, ok := h.p.HTTPRoute("ns", "web"); !ok || findCondition(r.Route.Status.Parents[0].Conditions, "Accepted").Status != metav1.ConditionTrue {
		t.Errorf("web: %+v %v", r, ok)
	}
	// A second pass keeps the transition times: a page polled twice is
	// the same page.
	before := h.p.Gateways()[0].Gateway.Status.Conditions[0].LastTransitionTime
	next := gatewayWorld()
	next.Gateways[0].Spec.Listeners[0].Hostname = ptr(gwv1.Hostname("*.example.com"))
	next.Gateways[0].Generation = 2
	h.offer(next)
	h.wait("view updated", func() bool { return h.p.Gateways()[0].Gateway.Status.Conditions[0].ObservedGeneration == 2 })
	if after := h.p.Gateways()[0].Gateway.Status.Conditions[0].LastTransitionTime; !after.Equal(&before) {
		t.Errorf("transition time moved: %v → %v", before, after)
	}
	// Another controller's entry, written to the route's status, is shown
	// where it is, beside pier's, without a rebuild.
	foreign := gatewayWorld()
	foreign.Gateways = next.Gateways
	r := foreign.HTTPRoutes[0].DeepCopy()
	r.ResourceVersion = "2"
	r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: "theirs"}, ControllerName: "example.com/other"}}
	foreign.HTTPRoutes[0] = r
	h.offer(foreign)
	h.wait("foreign entry shown", func() bool {
		r, ok := h.p.HTTPRoute("ns", "web")
		return ok && len(r.Route.Status.Parents) == 2 && r.Route.Status.Parents[0].ControllerName == "example.com/other" &&
			r.Route.Status.Parents[1].ControllerName == translate.DefaultGatewayControllerName
	})
	if _, ok := h.p.Gateway("ns", "absent"); ok {
		t.Error("an absent Gateway found")
	}
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
