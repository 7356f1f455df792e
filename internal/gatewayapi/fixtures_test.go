package gatewayapi

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// The test objects the Gateway API tests share with translate's (copies
// of its helpers: test files of one package are not visible to another).

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

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

func tlsSecretFor(t *testing.T, ns, name string, hosts ...string) *corev1.Secret {
	t.Helper()
	certPEM, keyPEM, err := tlscert.SelfSigned(hosts, epoch.Add(365*24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	}
}
