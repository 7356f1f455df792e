package translate

import (
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// The objects translate's tests share with gatewayapi's
// (internal/fixture), by the names these tests use.
var (
	epoch      = fixture.Epoch
	backend    = fixture.Backend
	rulesMatch = fixture.RulesMatch
)

// ingressYAML decodes an Ingress manifest; the namespace and creation time
// are set by the test.
func ingressYAML(t *testing.T, ns string, age int, doc string) *networkingv1.Ingress {
	t.Helper()
	ing := &networkingv1.Ingress{}
	if err := yaml.UnmarshalStrict([]byte(doc), ing); err != nil {
		t.Fatalf("decode ingress: %v", err)
	}
	ing.Namespace = ns
	ing.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(age) * time.Minute))
	return ing
}

// specYAML builds an Ingress from a spec only, as the conformance
// features write them.
func specYAML(t *testing.T, ns, name, spec string) *networkingv1.Ingress {
	t.Helper()
	indented := "  " + strings.ReplaceAll(strings.TrimSpace(spec), "\n", "\n  ")
	return ingressYAML(t, ns, 0, "metadata:\n  name: "+name+"\nspec:\n"+indented+"\n")
}

func ourClass(name string, isDefault bool) *networkingv1.IngressClass {
	c := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       networkingv1.IngressClassSpec{Controller: DefaultControllerName},
	}
	if isDefault {
		c.Annotations = map[string]string{annotationDefaultClass: "true"}
	}
	return c
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

// withBackends adds a Service and endpoints for every service an Ingress
// names (port number as given, or 8080 named "http" for named ports), as
// the conformance runner does.
func withBackends(snap *source.Snapshot, ing *networkingv1.Ingress) {
	seen := map[string]bool{}
	add := func(b *networkingv1.IngressBackend) {
		if b == nil || b.Service == nil || seen[b.Service.Name] {
			return
		}
		seen[b.Service.Name] = true
		port, name := b.Service.Port.Number, ""
		if b.Service.Port.Name != "" {
			port, name = 8080, b.Service.Port.Name
		}
		svc, es := backend(ing.Namespace, b.Service.Name, name, port, 1)
		snap.Services = append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, es)
	}
	add(ing.Spec.DefaultBackend)
	for _, r := range ing.Spec.Rules {
		if r.HTTP == nil {
			continue
		}
		for i := range r.HTTP.Paths {
			add(&r.HTTP.Paths[i].Backend)
		}
	}
}

// route evaluates a LoadBalancer's HTTP listener the way the rendered
// HAProxy config must: the first policy whose rules all match wins, then
// the default pool, then 404. It is the reference semantics the HAProxy
// integration tests are held to.
func routeRequest(lb *model.LoadBalancer, host, path string) string {
	l := lb.Listeners[0]
	host = strings.ToLower(host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	for _, p := range l.Policies {
		if rulesMatch(p.Rules, host, path) {
			return lb.Pool(p.PoolID).Service
		}
	}
	if l.DefaultPoolID != "" {
		return lb.Pool(l.DefaultPoolID).Service
	}
	return "404"
}

func ptrTo[T any](v T) *T { return &v }
