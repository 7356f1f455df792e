package status

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

func TestDecide(t *testing.T) {
	res := &translate.Result{
		Ours:     map[model.ObjectRef]bool{model.IngressRef("ns", "served"): true, model.IngressRef("ns", "pending"): true, model.IngressRef("ns", "refused"): true, model.IngressRef("ns", "was"): true},
		Accepted: map[model.ObjectRef]string{model.IngressRef("ns", "served"): "u1", model.IngressRef("ns", "pending"): "u2", model.IngressRef("ns", "was"): "u3"},
	}
	lbs := map[string]*model.LoadBalancer{
		"u1": {UUID: "u1", VIP: "127.10.0.1", FIP: "127.20.0.1", Status: model.Status{State: model.StateActive}},
		"u2": {UUID: "u2", VIP: "127.10.0.2", Status: model.Status{State: model.StatePending}},
		"u3": {UUID: "u3", VIP: "127.10.0.3", Status: model.Status{State: model.StatePending}},
	}
	prev := Published{
		model.IngressRef("ns", "was"):     {{IP: "127.10.0.3"}},
		model.IngressRef("ns", "refused"): {{IP: "127.10.0.9"}},
	}
	for _, lb := range lbs {
		if lb.Status.State == model.StateActive {
			lb.Status.SpecHash = lb.SpecHash() // the agent runs this very spec
		}
	}
	got := Decide(res, lbs, prev, Addresses{})
	want := Published{
		model.IngressRef("ns", "served"): {{IP: "127.10.0.1"}, {IP: "127.20.0.1"}},
		model.IngressRef("ns", "was"):    {{IP: "127.10.0.3"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if !Equal(got[k], v) {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	static := Decide(res, lbs, nil, Addresses{Static: []string{"lb.example.com", "192.0.2.1", "192.0.2.1"}})
	if s := static[model.IngressRef("ns", "served")]; len(s) != 2 || s[0].Hostname != "lb.example.com" || s[1].IP != "192.0.2.1" {
		t.Errorf("static = %v", s)
	}
}

func TestDecideFromService(t *testing.T) {
	res := &translate.Result{Ours: map[model.ObjectRef]bool{model.IngressRef("ns", "a"): true}, Accepted: map[model.ObjectRef]string{model.IngressRef("ns", "a"): "u1"}}
	lbs := map[string]*model.LoadBalancer{"u1": {UUID: "u1", VIP: "10.250.0.1", Status: model.Status{State: model.StateActive}}}
	lbs["u1"].Status.SpecHash = lbs["u1"].SpecHash()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "pier-system", Name: "pier"}}
	cfg := Addresses{Service: "pier-system/pier"}
	prev := Published{model.IngressRef("ns", "a"): {{IP: "192.0.2.9"}}}

	// No address on the Service yet: keep what is published.
	if got := Decide(res, lbs, prev, cfg.FromService([]*corev1.Service{svc})); !Equal(got[model.IngressRef("ns", "a")], prev[model.IngressRef("ns", "a")]) {
		t.Fatalf("without service addresses: %v", got)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.1"}, {Hostname: "lb.example.com"}}
	got := Decide(res, lbs, prev, cfg.FromService([]*corev1.Service{svc}))
	if s := got[model.IngressRef("ns", "a")]; len(s) != 2 || s[0].IP != "192.0.2.1" || s[1].Hostname != "lb.example.com" {
		t.Fatalf("from service: %v", s)
	}
}

// A new Ingress publishes nothing while the agent still runs an older
// spec of its load balancer: the address would answer without its routes.
func TestFirstPublicationWaitsForTheCurrentSpec(t *testing.T) {
	res := &translate.Result{Ours: map[model.ObjectRef]bool{model.IngressRef("ns", "new"): true}, Accepted: map[model.ObjectRef]string{model.IngressRef("ns", "new"): "u1"}}
	lb := &model.LoadBalancer{UUID: "u1", VIP: "10.250.0.1", Status: model.Status{State: model.StateActive, SpecHash: "older"}}
	if got := Decide(res, map[string]*model.LoadBalancer{"u1": lb}, nil, Addresses{}); len(got[model.IngressRef("ns", "new")]) != 0 {
		t.Fatalf("published before the agent applied the current spec: %v", got)
	}
	lb.Status.SpecHash = lb.SpecHash()
	if got := Decide(res, map[string]*model.LoadBalancer{"u1": lb}, nil, Addresses{}); len(got[model.IngressRef("ns", "new")]) != 1 {
		t.Fatalf("not published once the current spec is applied: %v", got)
	}
}

// A native Service and a Gateway publish their own VIP and FIP, whatever
// static or --status-service addresses the Ingresses publish.
func TestServicePublishesItsOwnAddresses(t *testing.T) {
	for _, kind := range []string{model.KindService, model.KindGateway} {
		t.Run(kind, func(t *testing.T) { ownAddresses(t, kind) })
	}
}

func ownAddresses(t *testing.T, kind string) {
	ref := model.ObjectRef{Kind: kind, Namespace: "ns", Name: "dns"}
	res := &translate.Result{Ours: map[model.ObjectRef]bool{ref: true}, Accepted: map[model.ObjectRef]string{ref: "u1"}}
	lb := &model.LoadBalancer{UUID: "u1", Provider: model.ProviderNative, VIP: "10.98.200.1", FIP: "203.0.113.7",
		Status: model.Status{State: model.StateActive}}
	lb.Status.SpecHash = lb.SpecHash()
	got := Decide(res, map[string]*model.LoadBalancer{"u1": lb}, nil, Addresses{Static: []string{"192.0.2.1"}, Service: "pier/front"})
	if !Equal(got[ref], []networkingv1.IngressLoadBalancerIngress{{IP: "10.98.200.1"}, {IP: "203.0.113.7"}}) {
		t.Fatalf("got %v", got[ref])
	}
}

// A Gateway that asked for an address (spec.addresses, the load
// balancer's RequestedFIP) publishes that address only, once served; one
// that did not, its VIP and FIP; a pinned Ingress still both.
func TestDecideGatewayPinned(t *testing.T) {
	gw := func(name string) model.ObjectRef {
		return model.ObjectRef{Kind: model.KindGateway, Namespace: "ns", Name: name}
	}
	res := &translate.Result{
		Ours:     map[model.ObjectRef]bool{gw("pinned"): true, gw("pooled"): true, model.IngressRef("ns", "ing"): true},
		Accepted: map[model.ObjectRef]string{gw("pinned"): "u1", gw("pooled"): "u2", model.IngressRef("ns", "ing"): "u3"},
	}
	lbs := map[string]*model.LoadBalancer{
		"u1": {UUID: "u1", VIP: "10.0.0.1", FIP: "192.0.2.7", RequestedFIP: "192.0.2.7"},
		"u2": {UUID: "u2", VIP: "10.0.0.2", FIP: "192.0.2.1"},
		"u3": {UUID: "u3", VIP: "10.0.0.3", FIP: "192.0.2.9", RequestedFIP: "192.0.2.9"},
	}
	for _, lb := range lbs {
		lb.Status = model.Status{State: model.StateActive, SpecHash: lb.SpecHash()}
	}
	got := Decide(res, lbs, nil, Addresses{})
	want := Published{
		gw("pinned"):                  {{IP: "192.0.2.7"}},
		gw("pooled"):                  {{IP: "10.0.0.2"}, {IP: "192.0.2.1"}},
		model.IngressRef("ns", "ing"): {{IP: "10.0.0.3"}, {IP: "192.0.2.9"}},
	}
	for k, v := range want {
		if !Equal(got[k], v) {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
}

// TestDecideKeepsUnchangedLists: a list already published as decided is
// handed back itself (a pass after each agent report allocates nothing
// for the thousands of unchanged ones); a changed address, a repeated or
// reordered one, or an entry with ports gives a new list, as before.
func TestDecideKeepsUnchangedLists(t *testing.T) {
	ref := model.IngressRef("ns", "a")
	res := &translate.Result{Ours: map[model.ObjectRef]bool{ref: true}, Accepted: map[model.ObjectRef]string{ref: "u1"}}
	lb := &model.LoadBalancer{UUID: "u1", VIP: "127.10.0.1", FIP: "127.20.0.1", Status: model.Status{State: model.StateActive}}
	lb.Status.SpecHash = lb.SpecHash()
	lbs := map[string]*model.LoadBalancer{"u1": lb}
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "127.10.0.1"}, {IP: "127.20.0.1"}}

	same := []networkingv1.IngressLoadBalancerIngress{{IP: "127.10.0.1"}, {IP: "127.20.0.1"}}
	if got := Decide(res, lbs, Published{ref: same}, Addresses{})[ref]; &got[0] != &same[0] {
		t.Errorf("an unchanged list was built again: %v", got)
	}
	for name, prev := range map[string][]networkingv1.IngressLoadBalancerIngress{
		"other address": {{IP: "127.10.0.1"}, {IP: "127.20.0.9"}},
		"reordered":     {{IP: "127.20.0.1"}, {IP: "127.10.0.1"}},
		"one missing":   {{IP: "127.10.0.1"}},
		"one more":      {{IP: "127.10.0.1"}, {IP: "127.20.0.1"}, {IP: "127.20.0.1"}},
		"as a hostname": {{IP: "127.10.0.1"}, {Hostname: "127.20.0.1"}},
		"with ports":    {{IP: "127.10.0.1", Ports: []networkingv1.IngressPortStatus{{Port: 80}}}, {IP: "127.20.0.1"}},
	} {
		got := Decide(res, lbs, Published{ref: prev}, Addresses{})[ref]
		if !Equal(got, want) || len(got[0].Ports) > 0 || &got[0] == &prev[0] {
			t.Errorf("%s: published %v, want a new %v", name, got, want)
		}
	}
	// Static addresses with a repeat: the deduplicated list is kept too.
	static := Addresses{Static: []string{"lb.example.com", "192.0.2.1", "192.0.2.1", ""}}
	kept := []networkingv1.IngressLoadBalancerIngress{{Hostname: "lb.example.com"}, {IP: "192.0.2.1"}}
	if got := Decide(res, lbs, Published{ref: kept}, static)[ref]; &got[0] != &kept[0] {
		t.Errorf("an unchanged static list was built again: %v", got)
	}
}

// BenchmarkDecide is a status pass over 3,000 published Ingresses, one
// load balancer each, none changed: the pass after an agent's report.
func BenchmarkDecide(b *testing.B) {
	res := &translate.Result{Ours: map[model.ObjectRef]bool{}, Accepted: map[model.ObjectRef]string{}}
	lbs := map[string]*model.LoadBalancer{}
	for i := range 3000 {
		ref, uuid := model.IngressRef("ns", fmt.Sprint("web-", i)), fmt.Sprint("u", i)
		res.Ours[ref], res.Accepted[ref] = true, uuid
		lb := &model.LoadBalancer{UUID: uuid, VIP: fmt.Sprintf("127.10.%d.%d", i/250, i%250+1), Status: model.Status{State: model.StateActive}}
		lb.Status.SpecHash = lb.SpecHash()
		lbs[uuid] = lb
	}
	prev := Decide(res, lbs, nil, Addresses{})
	b.ResetTimer()
	for range b.N {
		prev = Decide(res, lbs, prev, Addresses{})
	}
}
