package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// Epoch is the creation time of the oldest fixture Ingress; the others are
// one second apart, so every "oldest wins" decision is deterministic.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// ClassName is the IngressClass every fixture Ingress names.
const ClassName = "pier"

// IngressClass is pier's class, marked default.
func IngressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: ClassName,
			Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: translate.DefaultControllerName},
	}
}

// Backend is a Service ns/name on port 80 and its EndpointSlice: one ready
// endpoint per address, all on targetPort.
func Backend(ns, name string, targetPort int32, addrs ...string) (*corev1.Service, *discoveryv1.EndpointSlice) {
	port, ready, tcp := targetPort, true, corev1.ProtocolTCP
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intstr.FromInt32(targetPort), Protocol: tcp},
		}},
	}
	es := &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-a",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Port: &port, Protocol: &tcp}},
	}
	for i, a := range addrs {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-pod-" + strconv.Itoa(i)},
		})
	}
	return svc, es
}

// Ingress of our class, created age seconds after Epoch.
func Ingress(ns, name string, age int, rules ...networkingv1.IngressRule) *networkingv1.Ingress {
	class := ClassName
	return &networkingv1.Ingress{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(Epoch.Add(time.Duration(age) * time.Second))},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, Rules: rules},
	}
}

// Rule is one host (empty: every host) with its paths.
func Rule(host string, paths ...networkingv1.HTTPIngressPath) networkingv1.IngressRule {
	return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
		HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}}}
}

var (
	pathPrefix = networkingv1.PathTypePrefix
	pathExact  = networkingv1.PathTypeExact
)

// Prefix routes path (pathType Prefix) to port 80 of svc.
func Prefix(path, svc string) networkingv1.HTTPIngressPath { return httpPath(path, &pathPrefix, svc) }

// Exact routes path (pathType Exact) to port 80 of svc.
func Exact(path, svc string) networkingv1.HTTPIngressPath { return httpPath(path, &pathExact, svc) }

func httpPath(path string, pt *networkingv1.PathType, svc string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: pt, Backend: networkingv1.IngressBackend{
		Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}},
	}}
}

// ManyIngresses is n independent Ingresses (one load balancer each) in 50
// namespaces: host app-<i>.bench.example with Prefix /api and Prefix /, to a
// Service of its own with three ready endpoints.
func ManyIngresses(n int) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{IngressClass()}}
	for i := 0; i < n; i++ {
		ns, name := fmt.Sprintf("team-%02d", i%50), fmt.Sprintf("app-%05d", i)
		host := name + ".bench.example"
		snap.Ingresses = append(snap.Ingresses, Ingress(ns, name, i,
			Rule(host, Prefix("/api", name), Prefix("/", name))))
		svc, es := Backend(ns, name, 8080, endpointAddrs(i, 3)...)
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, es)
	}
	return snap
}

// GroupIngresses is one shared load balancer (pier.dev/load-balancer:
// shared) with paths paths: Ingresses of 50 paths each, one host per
// Ingress (every fifth a wildcard host), a quarter of the paths Exact, each
// Ingress with a Service of its own with three ready endpoints.
func GroupIngresses(paths int) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{IngressClass()}}
	const perIngress = 50
	for k := 0; k*perIngress < paths; k++ {
		name := fmt.Sprintf("shop-%03d", k)
		host := name + ".bench.example"
		if k%5 == 0 {
			host = "*." + host
		}
		var ps []networkingv1.HTTPIngressPath
		for j := k * perIngress; j < paths && j < (k+1)*perIngress; j++ {
			p := fmt.Sprintf("/p%04d", j)
			if j%4 == 0 {
				ps = append(ps, Exact(p, name))
			} else {
				ps = append(ps, Prefix(p, name))
			}
		}
		ing := Ingress("shop", name, k, Rule(host, ps...))
		ing.Annotations = map[string]string{annotation.Prefix + "load-balancer": "shared"}
		snap.Ingresses = append(snap.Ingresses, ing)
		svc, es := Backend("shop", name, 8080, endpointAddrs(k, 3)...)
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, es)
	}
	return snap
}

func endpointAddrs(i, n int) []string {
	out := make([]string, n)
	for j := range out {
		out[j] = fmt.Sprintf("10.%d.%d.%d", 64+j, i/256%256, i%256)
	}
	return out
}

// TranslateAndRender is the control-plane work pier does for a snapshot:
// translate.Ingresses, then render.Config for every load balancer (with a
// VIP assigned, as IPAM would). It returns the number of load balancers
// and the bytes of configuration rendered.
func TranslateAndRender(snap *source.Snapshot, opts translate.Options, stateDir string) (lbs, bytes int, err error) {
	res := translate.Ingresses(snap, opts)
	for i, lb := range res.LoadBalancers {
		lb.VIP = vip(i)
		conf, err := render.Config(lb, render.Options{Dir: filepath.Join(stateDir, "haproxy", lb.UUID)})
		if err != nil {
			return 0, 0, err
		}
		bytes += len(conf)
	}
	return len(res.LoadBalancers), bytes, nil
}

// vip is the i-th address of 127.10.0.0/16 (i < 65534), as IPAM hands them out.
func vip(i int) string {
	i++
	return "127.10." + strconv.Itoa(i/256) + "." + strconv.Itoa(i%256)
}

// DataPlaneHost and DataPlanePath are the request of the data-plane
// measurement: no host rule matches, no path rule but the catch-all, so
// HAProxy evaluates all 50 policies and takes the last. /health makes the
// echo backend answer a 2-byte "ok", so the proxy, not the backend's JSON
// encoding, dominates the cost.
const (
	DataPlaneHost = "www.unlisted.example"
	DataPlanePath = "/health"
	// DataPlaneTarget is the Service of the last policy.
	DataPlaneTarget = "target"
)

// DataPlaneSnapshot is the realistic load balancer of the data-plane
// measurement: one Ingress with 50 host/path rules, which translation
// orders into 50 policies.
//
//   - 8 hosts svc<k>.bench.example with Exact /healthz, Prefix /api/v1,
//     Prefix /api and Prefix /: 32 policies;
//   - 4 wildcard hosts *.t<k>.bench.example with Prefix /static and
//     Prefix /: 8 policies;
//   - 10 rules for every host: Exact /status and /robots.txt, Prefix
//     /metrics, /assets/v1, /assets/v2, /download, /docs, /blog, /shop and
//     the catch-all Prefix /, which is the last policy and the only one
//     routed to Service "target" (the echo at targetPort); every other
//     policy goes to one of ten "decoy" Services, all at decoyPort.
func DataPlaneSnapshot(targetPort, decoyPort int32) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{IngressClass()}}
	const ns = "bench"
	decoy := func(k int) string { return fmt.Sprintf("decoy-%d", k%10) }
	var rules []networkingv1.IngressRule
	for k := 1; k <= 8; k++ {
		d := decoy(k)
		rules = append(rules, Rule(fmt.Sprintf("svc%d.bench.example", k),
			Exact("/healthz", d), Prefix("/api/v1", d), Prefix("/api", d), Prefix("/", d)))
	}
	for k := 1; k <= 4; k++ {
		d := decoy(k + 8)
		rules = append(rules, Rule(fmt.Sprintf("*.t%d.bench.example", k), Prefix("/static", d), Prefix("/", d)))
	}
	var everyHost []networkingv1.HTTPIngressPath
	for i, p := range []string{"/status", "/robots.txt"} {
		everyHost = append(everyHost, Exact(p, decoy(i)))
	}
	for i, p := range []string{"/metrics", "/assets/v1", "/assets/v2", "/download", "/docs", "/blog", "/shop"} {
		everyHost = append(everyHost, Prefix(p, decoy(i+2)))
	}
	everyHost = append(everyHost, Prefix("/", DataPlaneTarget))
	rules = append(rules, Rule("", everyHost...))
	snap.Ingresses = []*networkingv1.Ingress{Ingress(ns, "shop", 0, rules...)}

	svc, es := Backend(ns, DataPlaneTarget, targetPort, "127.0.0.1")
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	for k := 0; k < 10; k++ {
		svc, es := Backend(ns, decoy(k), decoyPort, "127.0.0.1")
		snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	}
	return snap
}

// DataPlaneConfig translates DataPlaneSnapshot with the listener on port
// and renders it bound to vip, for an instance in dir. It checks that the
// last policy is the catch-all to DataPlaneTarget.
func DataPlaneConfig(targetPort, decoyPort int32, vip string, port int, dir string) ([]byte, *model.LoadBalancer, error) {
	opts := translate.DefaultOptions()
	opts.Members.AllowLoopback = true // the backends listen on 127.0.0.1, as in pier run
	opts.HTTPPort = port
	res := translate.Ingresses(DataPlaneSnapshot(targetPort, decoyPort), opts)
	if len(res.Problems) > 0 || len(res.LoadBalancers) != 1 {
		return nil, nil, fmt.Errorf("data-plane fixture: %d load balancers, problems %v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	lb.VIP = vip
	l := lb.Listeners[0]
	if n := len(l.Policies); n != 50 {
		return nil, nil, fmt.Errorf("data-plane fixture: %d policies, want 50", n)
	}
	last := l.Policies[len(l.Policies)-1]
	if p := lb.Pool(last.PoolID); p == nil || p.Service != DataPlaneTarget || len(last.Rules) != 1 || last.Rules[0].Value != "/" {
		return nil, nil, fmt.Errorf("data-plane fixture: the last policy is not the catch-all to %s: %+v", DataPlaneTarget, last)
	}
	conf, err := render.Config(lb, render.Options{Dir: dir})
	if err != nil {
		return nil, nil, err
	}
	return conf, lb, writeMaps(lb, dir)
}

// writeMaps writes lb's route maps into dir, where render.Config with
// Options.Dir = dir points.
func writeMaps(lb *model.LoadBalancer, dir string) error {
	files, err := render.Maps(lb, render.Options{Dir: dir})
	if err != nil {
		return err
	}
	for _, m := range files {
		if err := os.WriteFile(m.Path, m.Data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// referenceDefaults is the defaults section of every hand-written
// reference: the mode and timeouts render.Config writes.
const referenceDefaults = `defaults
    mode http
    timeout connect 5s
    timeout client 50s
    timeout server 50s
    timeout http-request 10s
    timeout http-keep-alive 10s
    timeout queue 30s
    timeout tunnel 1h
`

// ReferenceConfig is the minimal hand-written HAProxy configuration the
// data-plane figures are divided by: one frontend on bind, default_backend
// to one server, and the global maxconn and defaults timeouts render.Config
// writes (TestReferenceMatchesRender keeps them equal).
func ReferenceConfig(bind, server string) []byte {
	return []byte(`# bench reference: one frontend, one backend, pier's timeouts
global
    maxconn 4096

` + referenceDefaults + `
frontend fe_ref
    bind ` + bind + `
    default_backend be_ref

backend be_ref
    server s0 ` + server + `
`)
}
