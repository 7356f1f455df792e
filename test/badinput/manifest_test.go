package badinput

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"pier.dev/pier/internal/fixture"
)

// Manifests are written as JSON built from the API types: every payload
// reaches pier byte for byte, with no YAML quoting to get wrong. The one
// exception, invalid UTF-8, is spliced in raw by rawPayload.

var (
	pathImplSpecific = networkingv1.PathTypeImplementationSpecific
	pathPrefix       = networkingv1.PathTypePrefix
)

// ingress is an Ingress of class pier with one host and one path to the
// namespace's "app" Service on port 80.
func ingress(ns, name, host, path string) *networkingv1.Ingress {
	ing := fixture.Ingress(ns, name, "pier", fixture.Rule(host, fixture.Path(path, pathImplSpecific, "app", 80)))
	ing.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
	ing.CreationTimestamp = metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	return ing
}

// service is a Service named name on port 80 with one ready endpoint,
// 127.0.0.1:target: the echo backend answering for it.
func service(ns, name string, target int) []runtime.Object {
	port, ready := int32(target), true
	return []runtime.Object{
		&corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
				{Port: 80, TargetPort: intstr.FromInt32(port)},
			}},
		},
		&discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-a",
				Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"127.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		},
	}
}

func tlsSecret(ns, name string, cert, key []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key},
	}
}

func ingressClass() *networkingv1.IngressClass {
	return &networkingv1.IngressClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: "pier",
			Annotations: map[string]string{"ingressclass.kubernetes.io/is-default-class": "true"}},
		Spec: networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"},
	}
}

// list encodes objects as one v1 List.
func list(t testing.TB, objs ...runtime.Object) []byte {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rawPlaceholder stands in for bytes encoding/json cannot carry (invalid
// UTF-8); rawPayload swaps them in after encoding.
const rawPlaceholder = "RAW-PAYLOAD-PLACEHOLDER"

func rawPayload(doc []byte, raw string) []byte {
	return bytes.ReplaceAll(doc, []byte(rawPlaceholder), []byte(raw))
}
