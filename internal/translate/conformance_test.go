package translate

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/tlscert"
)

// The Ingresses of ../shared/conformance/features, copied verbatim, and
// every request those scenarios send, with the service that must answer.

const pathRulesIngress = `
metadata:
  name: path-rules
spec:
  ingressClassName: conformance
  rules:
    - host: "exact-path-rules"
      http:
        paths:
          - path: /foo
            pathType: Exact
            backend:
              service:
                name: foo-exact
                port:
                  number: 8080
    - host: "prefix-path-rules"
      http:
        paths:
          - path: /foo
            pathType: Prefix
            backend:
              service:
                name: foo-prefix
                port:
                  number: 8080
          - path: /aaa/bbb
            pathType: Prefix
            backend:
              service:
                name: aaa-slash-bbb-prefix
                port:
                  number: 8080
          - path: /aaa
            pathType: Prefix
            backend:
              service:
                name: aaa-prefix
                port:
                  number: 8080
    - host: "mixed-path-rules"
      http:
        paths:
          - path: /foo
            pathType: Prefix
            backend:
              service:
                name: foo-prefix
                port:
                  number: 8080
          - path: /foo
            pathType: Exact
            backend:
              service:
                name: foo-exact
                port:
                  number: 8080
    - host: "trailing-slash-path-rules"
      http:
        paths:
          - path: /aaa/bbb/
            pathType: Prefix
            backend:
              service:
                name: aaa-slash-bbb-slash-prefix
                port:
                  number: 8080
          - path: /foo/
            pathType: Exact
            backend:
              service:
                name: foo-slash-exact
                port:
                  number: 8080
`

const hostRulesIngress = `
metadata:
  name: host-rules
spec:
  ingressClassName: conformance
  tls:
    - hosts:
        - foo.bar.com
      secretName: conformance-tls
  rules:
    - host: "*.foo.com"
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: wildcard-foo-com
                port:
                  number: 8080
    - host: foo.bar.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: foo-bar-com
                port:
                  name: http
`

const defaultBackendSpec = `
ingressClassName: conformance
defaultBackend:
  service:
    name: echo-service
    port:
      number: 8080
`

type request struct{ host, path, want string }

func conformanceSnapshot(t *testing.T, ns, doc string) *source.Snapshot {
	t.Helper()
	ing := ingressYAML(t, ns, 0, doc)
	snap := &source.Snapshot{IngressClasses: classesForConformance()}
	snap.Ingresses = append(snap.Ingresses, ing)
	withBackends(snap, ing)
	return snap
}

func classesForConformance() []*networkingv1.IngressClass {
	return []*networkingv1.IngressClass{ourClass("conformance", false)}
}

func onlyLB(t *testing.T, res *Result) *model.LoadBalancer {
	t.Helper()
	for _, p := range res.Problems {
		t.Logf("problem: %+v", p)
	}
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("want 1 load balancer, got %d", len(res.LoadBalancers))
	}
	return res.LoadBalancers[0]
}

func checkRequests(t *testing.T, lb *model.LoadBalancer, reqs []request) {
	t.Helper()
	for _, r := range reqs {
		if got := routeRequest(lb, r.host, r.path); got != r.want {
			t.Errorf("%s%s: served by %q, want %q", r.host, r.path, got, r.want)
		}
	}
}

func TestConformancePathRules(t *testing.T) {
	res := Ingresses(conformanceSnapshot(t, "ns1", pathRulesIngress), DefaultOptions())
	lb := onlyLB(t, res)
	checkRequests(t, lb, []request{
		{"exact-path-rules", "/foo", "foo-exact"},
		{"exact-path-rules", "/foo/", "404"},
		{"exact-path-rules", "/FOO", "404"},
		{"exact-path-rules", "/bar", "404"},
		{"prefix-path-rules", "/foo", "foo-prefix"},
		{"prefix-path-rules", "/foo/", "foo-prefix"},
		{"prefix-path-rules", "/FOO", "404"},
		{"prefix-path-rules", "/aaa/bbb", "aaa-slash-bbb-prefix"},
		{"prefix-path-rules", "/aaa/bbb/ccc", "aaa-slash-bbb-prefix"},
		{"prefix-path-rules", "/aaa/ccc", "aaa-prefix"},
		{"prefix-path-rules", "/aaaccc", "404"},
		{"mixed-path-rules", "/foo", "foo-exact"},
		{"trailing-slash-path-rules", "/aaa/bbb", "aaa-slash-bbb-slash-prefix"},
		{"trailing-slash-path-rules", "/aaa/bbb/", "aaa-slash-bbb-slash-prefix"},
		{"trailing-slash-path-rules", "/foo", "404"},
	})
	if len(res.Problems) != 0 {
		t.Errorf("unexpected problems: %+v", res.Problems)
	}
}

func TestConformanceHostRules(t *testing.T) {
	snap := conformanceSnapshot(t, "ns2", hostRulesIngress)
	certPEM, keyPEM, err := tlscert.SelfSigned([]string{"foo.bar.com"}, epoch.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	snap.Secrets = append(snap.Secrets, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns2", Name: "conformance-tls"},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	})
	lb := onlyLB(t, Ingresses(snap, DefaultOptions()))
	checkRequests(t, lb, []request{
		{"foo.bar.com", "/", "foo-bar-com"},
		{"FOO.bar.com:80", "/x", "foo-bar-com"},
		{"subdomain.bar.com", "/", "404"},
		{"bar.foo.com", "/", "wildcard-foo-com"},
		{"baz.bar.foo.com", "/", "404"},
		{"foo.com", "/", "404"},
	})
	if len(lb.Listeners) != 2 {
		t.Fatalf("want http and https listeners, got %d", len(lb.Listeners))
	}
	https := lb.Listeners[1]
	if https.Protocol != model.ProtocolTerminatedHTTPS || https.Port != 443 {
		t.Errorf("https listener = %s:%d", https.Protocol, https.Port)
	}
	if len(https.Certificates) != 1 || https.Certificates[0].Hosts[0] != "foo.bar.com" || https.Certificates[0].SHA256 == "" {
		t.Errorf("certificates = %+v", https.Certificates)
	}
	if pool := lb.Pool(model.ID("pool", "ns2", "foo-bar-com", "http")); pool == nil || len(pool.Members) != 1 || pool.Members[0].Port != 3000 {
		t.Errorf("named port not resolved to the endpoint port: %+v", pool)
	}
}

func TestConformanceDefaultBackend(t *testing.T) {
	ing := specYAML(t, "ns3", "default-backend", defaultBackendSpec)
	snap := &source.Snapshot{IngressClasses: classesForConformance()}
	snap.Ingresses = append(snap.Ingresses, ing)
	withBackends(snap, ing)
	lb := onlyLB(t, Ingresses(snap, DefaultOptions()))
	checkRequests(t, lb, []request{
		{"my-host", "/", "echo-service"},
		{"my-host", "/sub-path", "echo-service"},
		{"some-host", "/resource", "echo-service"},
		{"", "/resource", "echo-service"},
	})
}

func TestConformanceIngressClass(t *testing.T) {
	doc := `
metadata:
  name: test-ingress-class
spec:
  ingressClassName: some-invalid-class-name
  rules:
    - host: "ingress-class"
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: ingress-class-prefix
                port:
                  number: 8080
`
	res := Ingresses(conformanceSnapshot(t, "ns4", doc), DefaultOptions())
	if len(res.LoadBalancers) != 0 || len(res.Ours) != 0 || len(res.Problems) != 0 {
		t.Fatalf("an Ingress of another class must be ignored entirely: %+v", res)
	}
}

func TestConformanceLoadBalancing(t *testing.T) {
	ing := specYAML(t, "ns5", "load-balancing", defaultBackendSpec)
	svc, es := backend("ns5", "echo-service", "", 8080, 10)
	snap := &source.Snapshot{IngressClasses: classesForConformance()}
	snap.Ingresses = append(snap.Ingresses, ing)
	snap.Services = append(snap.Services, svc)
	snap.EndpointSlices = append(snap.EndpointSlices, es)
	lb := onlyLB(t, Ingresses(snap, DefaultOptions()))
	if got := len(lb.Pools[0].Members); got != 10 {
		t.Fatalf("want 10 members, got %d", got)
	}
}
