package tenants

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/test/harness"
)

// Endpoints that loop or reach the node. The attacker's
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

// service-upstream makes the Service's ClusterIP the pool's only member,
// and whoever writes the Service chooses it. The attacker's Services put
// it at pier's own API and at the victim's VIP: before the endpoint
// policy applied to it, the attacker's public address served pier's
// state (GET /loadbalancers) and looped into the victim's load balancer.
// Both ClusterIPs are refused with the reason, and neither request gets
// anywhere.
func TestServiceUpstreamClusterIPThatLoopsOrReachesTheNode(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort),
		ingress(victimNS, "site", victimHost, 0, nil))...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)})
	victim := p.Addresses(victimNS, "site")

	apiHost, apiPortText, _ := net.SplitHostPort(p.API)
	apiPort, _ := strconv.Atoi(apiPortText)
	upstream := map[string]string{"nginx.ingress.kubernetes.io/service-upstream": "true"}
	api := ingress(attackerNS, "api", "api.attacker.example", 5, upstream)
	api.Spec.Rules[0].HTTP.Paths[0].Backend.Service = &networkingv1.IngressServiceBackend{Name: "api",
		Port: networkingv1.ServiceBackendPort{Number: int32(apiPort)}}
	loop := ingress(attackerNS, "loop", "loop.attacker.example", 6, upstream)
	loop.Spec.Rules[0].HTTP.Paths[0].Backend.Service = &networkingv1.IngressServiceBackend{Name: "loop",
		Port: networkingv1.ServiceBackendPort{Number: int32(p.HTTPPort)}}
	write(t, manifests, "20-attack.json",
		clusterIPService(attackerNS, "api", apiHost, apiPort), api,
		clusterIPService(attackerNS, "loop", victim[0], p.HTTPPort), loop)

	for _, a := range p.Addresses(attackerNS, "api") {
		code, body := getBody(t, a, p.HTTPPort, "api.attacker.example", "/loadbalancers")
		if code != http.StatusServiceUnavailable || strings.Contains(body, victimNS) {
			t.Errorf("GET /loadbalancers on the attacker's %s: %d %.80q, want 503 and none of pier's state", a, code, body)
		}
	}
	for _, a := range p.Addresses(attackerNS, "loop") {
		code, body := getBody(t, a, p.HTTPPort, "loop.attacker.example", "/")
		if code != http.StatusServiceUnavailable || strings.Contains(body, victimEcho) {
			t.Errorf("GET / on the attacker's %s: %d %.80q, want 503, not a loop into the victim", a, code, body)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"api", "ClusterIP " + p.API + " is pier's own API"},
		{"loop", "ClusterIP " + net.JoinHostPort(victim[0], strconv.Itoa(p.HTTPPort)) + " is in pier's address pool"},
	} {
		pr := waitProblem(t, p, attackerNS, tc.name, "EndpointRefused")
		if !strings.Contains(pr.Message, tc.want) {
			t.Errorf("%s: the warning %q does not say %q", tc.name, pr.Message, tc.want)
		}
	}
	for _, a := range victim {
		expectServed(t, p, a, victimHost, victimEcho, 3)
	}
}

// clusterIPService is a Service ns/name at clusterIP:port, without
// endpoints: service-upstream proxies to the ClusterIP alone.
func clusterIPService(ns, name, clusterIP string, port int) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: clusterIP,
			Ports: []corev1.ServicePort{{Port: int32(port), TargetPort: intstr.FromInt32(int32(port))}}},
	}
}

// getBody sends GET path with Host host to addr:port and returns the
// status and up to 4 KiB of the body.
func getBody(t *testing.T, addr string, port int, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(addr, strconv.Itoa(port))+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s%s on %s: %v", host, path, addr, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}
