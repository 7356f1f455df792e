package translate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

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

// backend makes a Service with one port (named when portName != "") and
// an EndpointSlice with n ready endpoints 10.244.<k>.<i>.
func backend(ns, name, portName string, port int32, n int) (*corev1.Service, *discoveryv1.EndpointSlice) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			ClusterIP: "10.96.0.10",
			Ports:     []corev1.ServicePort{{Name: portName, Port: port, Protocol: corev1.ProtocolTCP}},
		},
	}
	pn, pp, proto := portName, int32(3000), corev1.ProtocolTCP
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-abc",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &pn, Port: &pp, Protocol: &proto}},
	}
	for i := 0; i < n; i++ {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{"10.244." + itoa(len(name)) + "." + itoa(i+1)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: name + "-pod-" + itoa(i)},
		})
	}
	return svc, es
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

func rulesMatch(rules []model.L7Rule, host, path string) bool {
	for _, r := range rules {
		v := r.Value
		var ok bool
		switch {
		case r.Type == model.RuleHostName && r.Compare == model.CompareEqualTo:
			ok = host == v
		case r.Type == model.RuleHostName && r.Compare == model.CompareWildcard:
			suffix := v[1:]
			ok = strings.HasSuffix(host, suffix) && len(host) > len(suffix) &&
				!strings.Contains(host[:len(host)-len(suffix)], ".")
		case r.Type == model.RulePath && r.Compare == model.CompareEqualTo:
			ok = path == v
		case r.Type == model.RulePath && r.Compare == model.CompareStartsWith:
			ok = v == "/" || path == v || strings.HasPrefix(path, v+"/")
		}
		if !ok {
			return false
		}
	}
	return true
}

func ptrTo[T any](v T) *T { return &v }
