package tenants

import (
	"net"
	"strconv"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// Item 5 of issue 14: endpoints that loop or reach the node. The attacker's
// Service lists, beside its own pod, the victim's VIP (a proxy loop),
// pier's API (its state on a public address) and the metadata address.
// None becomes a member: the attacker's Ingress says which and why, its
// requests reach only its own pod, and the victim is untouched.
func TestEndpointsThatLoopOrReachTheNode(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort),
		ingress(victimNS, "site", victimHost, 0, nil))...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)})
	victim := p.Addresses(victimNS, "site")

	_, apiPort, _ := net.SplitHostPort(p.API)
	objs := service(attackerNS, attackerPort)
	slice := objs[1].(*discoveryv1.EndpointSlice)
	ready := true
	for _, addr := range []string{victim[0], "127.0.0.1", "169.254.169.254"} {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready}})
	}
	// One port per slice: the bad endpoints get a slice of their own on
	// the port that reaches each target.
	bad := slice.DeepCopy()
	bad.Name = "app-b"
	bad.Endpoints = bad.Endpoints[1:]
	slice.Endpoints = slice.Endpoints[:1]
	apiPortNum, _ := strconv.Atoi(apiPort)
	httpPort := int32(p.HTTPPort)
	apiP := int32(apiPortNum)
	loop := bad.DeepCopy()
	loop.Name, loop.Endpoints, loop.Ports[0].Port = "app-loop", loop.Endpoints[:1], &httpPort
	api := bad.DeepCopy()
	api.Name, api.Endpoints, api.Ports[0].Port = "app-api", api.Endpoints[1:2], &apiP
	meta := bad.DeepCopy()
	meta.Name, meta.Endpoints = "app-meta", meta.Endpoints[2:]
	host := "attacker.example"
	write(t, manifests, "20-attack.json", append([]runtime.Object{objs[0], slice, loop, api, meta},
		ingress(attackerNS, "evil", host, 5, nil))...)

	pr := waitProblem(t, p, attackerNS, "evil", "EndpointRefused")
	for _, want := range []string{
		net.JoinHostPort(victim[0], strconv.Itoa(p.HTTPPort)) + " is in pier's address pool",
		"127.0.0.1:" + apiPort + " is pier's own API",
		"169.254.169.254:" + strconv.Itoa(attackerPort) + " is a link-local address",
	} {
		if !strings.Contains(pr.Message, want) {
			t.Errorf("the warning %q does not say %q", pr.Message, want)
		}
	}
	for _, a := range p.Addresses(attackerNS, "evil") {
		expectServed(t, p, a, host, attackerEcho, 12)
	}
	for _, a := range victim {
		expectServed(t, p, a, victimHost, victimEcho, 3)
	}
}
