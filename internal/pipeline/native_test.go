package pipeline

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

func nativeService(name, uid, lbIP string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("aaaaaaaa-0000-4000-8000-" + uid), ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: ptr(translate.NativeClass),
			LoadBalancerIP: lbIP, Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
}

func nativeSlice(addr, version string) *discoveryv1.EndpointSlice {
	ready, port, proto := true, int32(5353), corev1.ProtocolUDP
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: "dns-1", ResourceVersion: version, Labels: map[string]string{discoveryv1.LabelServiceName: "dns"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("dns"), Port: &port, Protocol: &proto}},
	}
}

// A native Service goes through the same loop as an Ingress: stored with
// an address, rebuilt when its endpoints change, refused alone when it
// pins an address outside every pool, removed when it stops being of
// type LoadBalancer. The Ingress beside it is never disturbed.
func TestNativeServiceThroughTheLoop(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	snap := world()
	snap.Services = append(snap.Services, nativeService("dns", "000000000001", ""))
	snap.EndpointSlices = append(snap.EndpointSlices, nativeSlice("10.244.0.7", "1"))
	h.offer(snap)
	lbs, err := h.raw.List(ctx)
	if err != nil || len(lbs) != 2 {
		t.Fatalf("stored %d load balancers (%v), want the Ingress's and the Service's", len(lbs), err)
	}
	var dns, web *model.LoadBalancer
	for _, lb := range lbs {
		if lb.Provider == model.ProviderNative {
			dns = lb
		} else {
			web = lb
		}
	}
	if dns == nil || dns.Name != "ns/dns" || dns.VIP == "" || dns.Placement.Active != "n1" ||
		len(dns.Pools) != 1 || len(dns.Pools[0].Members) != 1 || dns.Pools[0].Members[0].Port != 5353 {
		t.Fatalf("native load balancer: %+v", dns)
	}

	// An endpoint change rebuilds and reaches the store.
	before := h.rebuilds(ReasonEndpoints)
	next := clone(snap)
	next.EndpointSlices[1] = nativeSlice("10.244.0.8", "2")
	h.offer(next)
	if h.rebuilds(ReasonEndpoints) != before+1 {
		t.Fatal("an endpoint change of a native Service did not rebuild")
	}
	got, _ := h.raw.Get(ctx, dns.UUID)
	if got.Pools[0].Members[0].Address != "10.244.0.8" {
		t.Fatalf("members %+v", got.Pools[0].Members)
	}

	// A pin outside every pool refuses that Service only.
	bad := clone(next)
	bad.Services = append(bad.Services, nativeService("pinned", "000000000002", "192.0.2.9"))
	h.offer(bad)
	ref := model.ObjectRef{Kind: model.KindService, Namespace: "ns", Name: "pinned"}
	if ps := h.p.Book.Of(ref); len(ps) != 1 || ps[0].Reason != "ExternalIPOutsidePool" {
		t.Fatalf("problems of the pinned Service: %+v", ps)
	}
	for _, lb := range []*model.LoadBalancer{got, web} {
		now, err := h.raw.Get(ctx, lb.UUID)
		if err != nil || now.SpecHash() != lb.SpecHash() || now.VIP != lb.VIP {
			t.Fatalf("%s disturbed by a bad Service: %v", lb.Name, err)
		}
	}

	// No longer of type LoadBalancer: its load balancer goes.
	gone := clone(bad)
	for i, s := range gone.Services {
		if s.Name == "dns" {
			c := s.DeepCopy()
			c.Spec.Type, c.Spec.LoadBalancerClass, c.ResourceVersion = corev1.ServiceTypeClusterIP, nil, "2"
			gone.Services[i] = c
		}
	}
	h.offer(gone)
	if _, err := h.raw.Get(ctx, dns.UUID); err == nil {
		t.Fatal("the load balancer of a Service no longer of type LoadBalancer is still stored")
	}
}
