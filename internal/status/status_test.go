package status

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

func TestDecide(t *testing.T) {
	res := &translate.Result{
		Ours:     map[string]bool{"ns/served": true, "ns/pending": true, "ns/refused": true, "ns/was": true},
		Accepted: map[string]string{"ns/served": "u1", "ns/pending": "u2", "ns/was": "u3"},
	}
	lbs := map[string]*model.LoadBalancer{
		"u1": {UUID: "u1", VIP: "127.10.0.1", FIP: "127.20.0.1", Status: model.Status{State: model.StateActive}},
		"u2": {UUID: "u2", VIP: "127.10.0.2", Status: model.Status{State: model.StatePending}},
		"u3": {UUID: "u3", VIP: "127.10.0.3", Status: model.Status{State: model.StatePending}},
	}
	prev := map[string][]networkingv1.IngressLoadBalancerIngress{
		"ns/was":     {{IP: "127.10.0.3"}},
		"ns/refused": {{IP: "127.10.0.9"}},
	}
	got := Decide(res, lbs, prev, Addresses{})
	want := map[string][]networkingv1.IngressLoadBalancerIngress{
		"ns/served": {{IP: "127.10.0.1"}, {IP: "127.20.0.1"}},
		"ns/was":    {{IP: "127.10.0.3"}},
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
	if s := static["ns/served"]; len(s) != 2 || s[0].Hostname != "lb.example.com" || s[1].IP != "192.0.2.1" {
		t.Errorf("static = %v", s)
	}
}
