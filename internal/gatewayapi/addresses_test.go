package gatewayapi

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// TestGatewayAddresses: spec.addresses asks IPAM for one IP address (the
// load balancer's RequestedFIP) or, without a value, for any; other types
// are refused (Accepted=False/UnsupportedAddress) and more than one entry,
// or a pin from a namespace that may not pin, is AddressNotUsable with
// the load balancer held back, while every other Gateway is served.
func TestGatewayAddresses(t *testing.T) {
	gw := func(name, addresses string) string {
		return "\n---\nkind: Gateway\nmetadata: {name: " + name + "}\nspec:\n  gatewayClassName: pier\n" +
			"  addresses: " + addresses + "\n  listeners: [{name: http, port: 80, protocol: HTTP}]\n"
	}
	docs := gatewayClassDoc +
		gw("pinned", "[{type: IPAddress, value: 10.250.3.7}]") +
		gw("default-type", "[{value: 10.250.3.8}]") +
		gw("empty-value", "[{type: IPAddress}]") +
		gw("none", "[]") +
		gw("hostname", "[{type: Hostname, value: lb.example.com}]") +
		gw("named", "[{type: NamedAddress, value: my-address}]") +
		gw("fake-type", "[{type: test/fake-invalid-type, value: x}, {type: IPAddress, value: 10.250.3.9}]") +
		gw("not-ip", "[{type: IPAddress, value: 'fake address teehee!'}]") +
		gw("two", "[{type: IPAddress, value: 192.0.2.1}, {type: IPAddress, value: 10.250.3.10}]") +
		gw("value-and-empty", "[{type: IPAddress, value: 10.250.3.11}, {type: IPAddress}]") +
		"\n---\nkind: Gateway\nmetadata: {name: other-ns, namespace: tenant}\nspec:\n  gatewayClassName: pier\n" +
		"  addresses: [{value: 10.250.3.12}]\n  listeners: [{name: http, port: 80, protocol: HTTP}]\n"
	opts := gatewayOpts()
	opts.ExternalIPNamespaces = []string{"default"}
	res := Translate(gatewaySnap(t, docs), opts)

	lbs := map[string]string{} // Gateway name → RequestedFIP
	for _, lb := range res.LoadBalancers {
		lbs[lb.Sources[0].Name] = lb.RequestedFIP
		if lb.CreatedAt.IsZero() {
			t.Errorf("%s: load balancer without CreatedAt (IPAM's older-wins order)", lb.Name)
		}
	}
	cond := func(name, typ string) metav1.Condition {
		return findCondition(t, res.Gateway.Gateways[gatewayRef(namespaceOf(name), name)].Conditions, typ)
	}
	for name, pin := range map[string]string{"pinned": "10.250.3.7", "default-type": "10.250.3.8", "empty-value": "", "none": ""} {
		if got, ok := lbs[name]; !ok || got != pin {
			t.Errorf("%s: load balancer %v, RequestedFIP %q, want %q", name, ok, got, pin)
		}
		if c := cond(name, "Accepted"); c.Status != metav1.ConditionTrue {
			t.Errorf("%s: Accepted %s/%s", name, c.Status, c.Reason)
		}
		if c := cond(name, "Programmed"); c.Reason != string(gwv1.GatewayReasonPending) {
			t.Errorf("%s: Programmed %s/%s, want Pending", name, c.Status, c.Reason)
		}
		if res.AddressRefused[res.Accepted[gatewayRef("default", name)]] {
			t.Errorf("%s: address refused", name)
		}
	}
	for _, name := range []string{"hostname", "named", "fake-type", "not-ip"} {
		if _, ok := lbs[name]; ok {
			t.Errorf("%s: got a load balancer", name)
		}
		if c := cond(name, "Accepted"); c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonUnsupportedAddress) {
			t.Errorf("%s: Accepted %s/%s, want False/UnsupportedAddress", name, c.Status, c.Reason)
		}
		if !hasProblem(res, name, string(gwv1.GatewayReasonUnsupportedAddress)) {
			t.Errorf("%s: no UnsupportedAddress problem", name)
		}
	}
	for name, words := range map[string]string{"two": "2 are requested (192.0.2.1, 10.250.3.10)",
		"value-and-empty": "(10.250.3.11, (any))", "other-ns": "namespace tenant may not pin"} {
		if c := cond(name, "Accepted"); c.Status != metav1.ConditionTrue || c.Reason != string(gwv1.GatewayReasonAccepted) {
			t.Errorf("%s: Accepted %s/%s, want True/Accepted", name, c.Status, c.Reason)
		}
		c := cond(name, "Programmed")
		if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonAddressNotUsable) || !strings.Contains(c.Message, words) {
			t.Errorf("%s: Programmed %s/%s %q, want False/AddressNotUsable with %q", name, c.Status, c.Reason, c.Message, words)
		}
		// The load balancer is built but held back: the reconciler keeps
		// what serves and creates nothing new.
		uuid, ok := res.Accepted[gatewayRef(namespaceOf(name), name)]
		if !ok || !res.AddressRefused[uuid] {
			t.Errorf("%s: load balancer %v, held back %v", name, ok, res.AddressRefused[uuid])
		}
		if !hasProblem(res, name, string(gwv1.GatewayReasonAddressNotUsable)) {
			t.Errorf("%s: no AddressNotUsable problem", name)
		}
	}
}

func namespaceOf(name string) string {
	if name == "other-ns" {
		return "tenant"
	}
	return "default"
}

func hasProblem(res *translate.Result, name, reason string) bool {
	for _, p := range res.Problems {
		if p.Name == name && p.Reason == reason {
			return true
		}
	}
	return false
}

// TestGatewayNotProgrammed: a problem the reconciler reports for a
// Gateway (an address IPAM refused) turns its Programmed condition False
// with the problem's reason and message; other Gateways are untouched.
func TestGatewayNotProgrammed(t *testing.T) {
	docs := gatewayClassDoc + `
---
kind: Gateway
metadata: {name: a}
spec: {gatewayClassName: pier, addresses: [{value: 10.9.9.9}], listeners: [{name: http, port: 80, protocol: HTTP}]}
---
kind: Gateway
metadata: {name: b}
spec: {gatewayClassName: pier, listeners: [{name: http, port: 80, protocol: HTTP}]}
`
	res := Translate(gatewaySnap(t, docs), gatewayOpts())
	res.Gateway.NotProgrammed([]model.Problem{{Kind: "Gateway", Namespace: "default", Name: "a",
		Severity: "Error", Reason: "AddressNotUsable", Message: "external IP 10.9.9.9 is outside the configured pools"},
		{Kind: "Ingress", Namespace: "default", Name: "b", Reason: "ExternalIPInUse"}})
	a := findCondition(t, res.Gateway.Gateways[gatewayRef("default", "a")].Conditions, "Programmed")
	if a.Status != metav1.ConditionFalse || a.Reason != "AddressNotUsable" || !strings.Contains(a.Message, "outside") {
		t.Errorf("a: %s/%s %q", a.Status, a.Reason, a.Message)
	}
	if b := findCondition(t, res.Gateway.Gateways[gatewayRef("default", "b")].Conditions, "Programmed"); b.Reason != "Pending" {
		t.Errorf("b: %s/%s", b.Status, b.Reason)
	}
	var none *translate.GatewayStatus
	none.NotProgrammed(nil) // no Gateways translated: no panic
}
