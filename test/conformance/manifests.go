package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The manifests the files cluster writes for `pier run -f`: the same
// objects a Kubernetes cluster would hold, with loopback endpoints.

// podEndpoint is one ready echo pod of a backend.
type podEndpoint struct {
	Name    string
	Address string
	Port    int32
}

// endpointSliceManager marks the slices the files cluster writes, as the
// EndpointSlice controller marks its own.
const endpointSliceManager = "conformance.pier.dev"

// ingressClassManifest is the IngressClass a cluster admin would create
// for the suite: class "conformance", implemented by pier.
func ingressClassManifest() ([]byte, error) {
	return renderDocs(&networkingv1.IngressClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass"},
		ObjectMeta: metav1.ObjectMeta{Name: IngressClass},
		Spec:       networkingv1.IngressClassSpec{Controller: IngressController},
	})
}

// servicePort is the Service port for an Ingress backend port: its number,
// or DefaultNamedPort under its name when the Ingress names the port.
func servicePort(port networkingv1.ServiceBackendPort) corev1.ServicePort {
	sp := corev1.ServicePort{
		Name:       port.Name,
		Protocol:   corev1.ProtocolTCP,
		Port:       port.Number,
		TargetPort: intstr.FromInt32(EchoPort),
	}
	if sp.Port == 0 {
		sp.Port = DefaultNamedPort
	}
	return sp
}

// backendManifest is a backend's Service and its endpoints: one
// EndpointSlice per pod, because each echo process listens on a port of
// its own and a slice has one port list for all its endpoints. The slice
// port carries the Service port's name, which is how a controller pairs
// them; its number is the pod's real port (the targetPort 3000 of the
// Service is what a pod would listen on in a cluster).
func backendManifest(ns, ingressName, service string, port networkingv1.ServiceBackendPort, pods []podEndpoint) ([]byte, error) {
	sp := servicePort(port)
	objs := []any{&corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: service, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{"app": deploymentName(ingressName, service)},
			Ports:    []corev1.ServicePort{sp},
		},
	}}
	ready, serving, terminating := true, true, false
	for _, pod := range pods {
		name, portNum, proto := sp.Name, pod.Port, corev1.ProtocolTCP
		objs = append(objs, &discoveryv1.EndpointSlice{
			TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
			ObjectMeta: metav1.ObjectMeta{
				Name:      pod.Name,
				Namespace: ns,
				Labels: map[string]string{
					discoveryv1.LabelServiceName: service,
					discoveryv1.LabelManagedBy:   endpointSliceManager,
				},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &portNum, Protocol: &proto}},
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{pod.Address},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready, Serving: &serving, Terminating: &terminating},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: pod.Name},
			}},
		})
	}
	return renderDocs(objs...)
}

// secretManifest is a kubernetes.io/tls Secret.
func secretManifest(ns, name string, certPEM, keyPEM []byte) ([]byte, error) {
	return renderDocs(&corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
	})
}

// ingressManifest is ing as created by a user: in ns, with no status.
func ingressManifest(ns string, ing *networkingv1.Ingress) ([]byte, error) {
	out := ing.DeepCopy()
	out.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}
	out.Namespace = ns
	out.Status = networkingv1.IngressStatus{}
	return renderDocs(out)
}

// renderDocs writes objs as one multi-document YAML stream, leaving out
// the empty status and null creationTimestamp that typed objects carry.
func renderDocs(objs ...any) ([]byte, error) {
	var buf bytes.Buffer
	for i, obj := range objs {
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil, fmt.Errorf("encoding manifest: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("encoding manifest: %w", err)
		}
		delete(m, "status")
		if md, ok := m["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		doc, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("encoding manifest: %w", err)
		}
		if i > 0 {
			buf.WriteString("---\n")
		}
		buf.Write(doc)
	}
	return buf.Bytes(), nil
}

// deploymentName is upstream's name for a backend's Deployment.
func deploymentName(ingressName, service string) string {
	return ingressName + "-" + service
}
