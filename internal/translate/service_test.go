package translate

import (
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

func serviceYAML(t *testing.T, doc string) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{}
	if err := yaml.UnmarshalStrict([]byte(doc), svc); err != nil {
		t.Fatalf("decode service: %v", err)
	}
	if svc.Namespace == "" {
		svc.Namespace = "shop"
	}
	return svc
}

func sliceYAML(t *testing.T, doc string) *discoveryv1.EndpointSlice {
	t.Helper()
	es := &discoveryv1.EndpointSlice{}
	if err := yaml.UnmarshalStrict([]byte(doc), es); err != nil {
		t.Fatalf("decode slice: %v", err)
	}
	es.Namespace = "shop"
	return es
}

// dnsSvc is a native Service with a TCP and a UDP port, a named
// targetPort, and a slice with two ready endpoints and one not ready.
const dnsSvc = `
metadata: {name: dns, uid: 11111111-2222-3333-4444-555555555555}
spec:
  type: LoadBalancer
  loadBalancerClass: pier.dev/native
  ports:
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: dns}
  - {name: dns-udp, port: 53, protocol: UDP, targetPort: dns}
`

const dnsSlice = `
metadata: {name: dns-abc, labels: {kubernetes.io/service-name: dns}}
addressType: IPv4
ports:
- {name: dns-tcp, port: 5353, protocol: TCP}
- {name: dns-udp, port: 5353, protocol: UDP}
endpoints:
- addresses: [10.244.0.2]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: dns-0}
- addresses: [10.244.0.1]
  conditions: {ready: true}
- addresses: [10.244.0.3]
  conditions: {ready: false, serving: false}
`

func TestServiceTranslated(t *testing.T) {
	snap := &source.Snapshot{Services: []*corev1.Service{serviceYAML(t, dnsSvc)},
		EndpointSlices: []*discoveryv1.EndpointSlice{sliceYAML(t, dnsSlice)}}
	res := Services(snap, DefaultOptions())
	if len(res.Problems) != 0 || len(res.LoadBalancers) != 1 {
		t.Fatalf("problems %v, load balancers %d", res.Problems, len(res.LoadBalancers))
	}
	lb := res.LoadBalancers[0]
	if lb.UUID != "11111111-2222-3333-4444-555555555555" || lb.Provider != model.ProviderNative || lb.Name != "shop/dns" {
		t.Fatalf("identity: %s %s %s", lb.UUID, lb.Provider, lb.Name)
	}
	if len(lb.Listeners) != 2 || lb.Listeners[0].Protocol != model.ProtocolTCP || lb.Listeners[1].Protocol != model.ProtocolUDP {
		t.Fatalf("listeners %+v", lb.Listeners)
	}
	for i, p := range lb.Pools {
		if lb.Listeners[i].DefaultPoolID != p.ID || lb.Listeners[i].Port != 53 {
			t.Fatalf("listener %d: %+v, pool %s", i, lb.Listeners[i], p.ID)
		}
		got := []string{}
		for _, m := range p.Members {
			got = append(got, m.Address+":"+strconv.Itoa(m.Port))
		}
		if strings.Join(got, ",") != "10.244.0.1:5353,10.244.0.2:5353" {
			t.Fatalf("pool %s members %v: want the two ready endpoints on the resolved targetPort", p.Name, got)
		}
		if p.Algorithm != model.AlgorithmRoundRobin {
			t.Fatalf("algorithm %s", p.Algorithm)
		}
	}
	ref := model.ObjectRef{Kind: model.KindService, Namespace: "shop", Name: "dns"}
	if res.Accepted[ref] != lb.UUID || !res.Ours[ref] {
		t.Fatalf("accepted %v ours %v", res.Accepted, res.Ours)
	}
	if again := Services(snap, DefaultOptions()); again.LoadBalancers[0].SpecHash() != lb.SpecHash() {
		t.Fatal("two translations differ")
	}
}

// TestServiceRefused: each bad Service gets one Error problem naming the
// field, is not served, and the good Service beside it is unchanged.
func TestServiceRefused(t *testing.T) {
	good := serviceYAML(t, dnsSvc)
	alone := Services(&source.Snapshot{Services: []*corev1.Service{good}}, DefaultOptions())
	head := "metadata: {name: bad}\nspec:\n  type: LoadBalancer\n  loadBalancerClass: pier.dev/native\n"
	for _, tc := range []struct {
		name, spec, reason, field string
	}{
		{"port 0", "  ports: [{port: 0}]\n", "InvalidPort", "spec.ports[0].port"},
		{"no ports", "", "NoPorts", "spec.ports"},
		{"duplicate ports", "  ports: [{name: a, port: 80}, {name: b, port: 80, protocol: TCP}]\n", "DuplicatePort", "spec.ports[1]"},
		{"sctp", "  ports: [{port: 80, protocol: SCTP}]\n", "UnsupportedProtocol", "spec.ports[0].protocol"},
		{"local policy", "  externalTrafficPolicy: Local\n  ports: [{port: 80}]\n", "UnsupportedTrafficPolicy", "spec.externalTrafficPolicy"},
		{"source ranges", "  loadBalancerSourceRanges: [10.0.0.0/8]\n  ports: [{port: 80}]\n", "UnsupportedSourceRanges", "spec.loadBalancerSourceRanges"},
		{"ipv6", "  ipFamilies: [IPv6]\n  ports: [{port: 80}]\n", "UnsupportedIPFamily", "spec.ipFamilies"},
		{"bad loadBalancerIP", "  loadBalancerIP: \"10.0.0.1\\n\"\n  ports: [{port: 80}]\n", "InvalidExternalIP", "spec.loadBalancerIP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := serviceYAML(t, head+tc.spec)
			res := Services(&source.Snapshot{Services: []*corev1.Service{good, bad}}, DefaultOptions())
			if len(res.Problems) != 1 {
				t.Fatalf("problems %+v", res.Problems)
			}
			p := res.Problems[0]
			if p.Name != "bad" || p.Reason != tc.reason || p.Field != tc.field || p.Severity != model.SeverityError || p.Message == "" {
				t.Fatalf("problem %+v, want %s at %s", p, tc.reason, tc.field)
			}
			if len(res.LoadBalancers) != 1 || res.LoadBalancers[0].SpecHash() != alone.LoadBalancers[0].SpecHash() {
				t.Fatal("the good Service was disturbed")
			}
			if !res.Ours[model.ObjectRef{Kind: model.KindService, Namespace: "shop", Name: "bad"}] {
				t.Fatal("a refused Service of ours is not in Ours")
			}
		})
	}
}

func TestServiceClassesAndOptions(t *testing.T) {
	other := serviceYAML(t, "metadata: {name: other}\nspec: {type: LoadBalancer, loadBalancerClass: example.com/lb, ports: [{port: 80}]}\n")
	classless := serviceYAML(t, "metadata: {name: plain}\nspec: {type: LoadBalancer, ports: [{port: 80}]}\n")
	cluster := serviceYAML(t, "metadata: {name: internal}\nspec: {type: ClusterIP, ports: [{port: 80}]}\n")
	snap := &source.Snapshot{Services: []*corev1.Service{other, classless, cluster}}
	if res := Services(snap, DefaultOptions()); len(res.LoadBalancers) != 0 || len(res.Problems) != 0 || len(res.Ours) != 0 {
		t.Fatalf("without the flag: %d load balancers, problems %v, ours %v", len(res.LoadBalancers), res.Problems, res.Ours)
	}
	opts := DefaultOptions()
	opts.TakeClasslessServices = true
	res := Services(snap, opts)
	if len(res.LoadBalancers) != 1 || res.LoadBalancers[0].Name != "shop/plain" {
		t.Fatalf("with the flag: %+v", res.LoadBalancers)
	}
	if res.LoadBalancers[0].UUID == "" {
		t.Fatal("a Service without UID needs a name-based UUID")
	}
}

func TestServicePinsAndAffinity(t *testing.T) {
	svc := serviceYAML(t, `
metadata: {name: web, annotations: {pier.dev/external-ip: 203.0.113.7}}
spec:
  type: LoadBalancer
  loadBalancerClass: pier.dev/native
  loadBalancerIP: 203.0.113.7
  sessionAffinity: ClientIP
  allocateLoadBalancerNodePorts: false
  ports: [{port: 443}]
`)
	res := Services(&source.Snapshot{Services: []*corev1.Service{svc}}, DefaultOptions())
	if len(res.Problems) != 0 || len(res.LoadBalancers) != 1 {
		t.Fatalf("problems %v", res.Problems)
	}
	lb := res.LoadBalancers[0]
	if lb.RequestedFIP != "203.0.113.7" || lb.Pools[0].Algorithm != model.AlgorithmSourceIP {
		t.Fatalf("fip %q algorithm %s", lb.RequestedFIP, lb.Pools[0].Algorithm)
	}
	svc.Annotations[annotation.ExternalIP] = "203.0.113.8"
	res = Services(&source.Snapshot{Services: []*corev1.Service{svc}}, DefaultOptions())
	if len(res.Problems) != 1 || res.Problems[0].Reason != "ExternalIPConflict" {
		t.Fatalf("two pins: %+v", res.Problems)
	}
	opts := DefaultOptions()
	opts.ExternalIPNamespaces = []string{"admin"}
	svc.Annotations = nil
	res = Services(&source.Snapshot{Services: []*corev1.Service{svc}}, opts)
	if len(res.Problems) != 1 || res.Problems[0].Reason != "ExternalIPNotAllowed" {
		t.Fatalf("pin from a namespace not allowed: %+v", res.Problems)
	}
}
