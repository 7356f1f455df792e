package conformance

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"
)

// splitDocs splits a multi-document YAML stream the way renderDocs joins it.
func splitDocs(t *testing.T, data []byte) []string {
	t.Helper()
	docs := strings.Split(string(data), "---\n")
	for i, d := range docs {
		if strings.TrimSpace(d) == "" {
			t.Fatalf("document %d is empty in:\n%s", i, data)
		}
	}
	return docs
}

func decode(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatalf("%v in:\n%s", err, doc)
	}
}

func TestBackendManifest(t *testing.T) {
	pods := []podEndpoint{{Name: "hr-foo-bar-com-abcde", Address: "127.0.0.1", Port: 40001}, {Name: "hr-foo-bar-com-fghjk", Address: "127.0.0.1", Port: 40002}}
	for _, tc := range []struct {
		name     string
		port     networkingv1.ServiceBackendPort
		wantName string
		wantPort int32
	}{
		{"numbered", networkingv1.ServiceBackendPort{Number: 8080}, "", 8080},
		{"named", networkingv1.ServiceBackendPort{Name: "http"}, "http", DefaultNamedPort},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := backendManifest("ns-1", "hr", "foo-bar-com", tc.port, pods)
			if err != nil {
				t.Fatal(err)
			}
			docs := splitDocs(t, data)
			if len(docs) != 3 {
				t.Fatalf("%d documents, want a Service and one slice per pod", len(docs))
			}
			var svc corev1.Service
			decode(t, docs[0], &svc)
			sp := svc.Spec.Ports
			if svc.Kind != "Service" || svc.APIVersion != "v1" || svc.Name != "foo-bar-com" || svc.Namespace != "ns-1" ||
				len(sp) != 1 || sp[0].Name != tc.wantName || sp[0].Port != tc.wantPort || sp[0].TargetPort.IntValue() != EchoPort ||
				svc.Spec.Selector["app"] != "hr-foo-bar-com" {
				t.Errorf("service:\n%s", docs[0])
			}
			for i, doc := range docs[1:] {
				var es discoveryv1.EndpointSlice
				decode(t, doc, &es)
				if es.Kind != "EndpointSlice" || es.APIVersion != "discovery.k8s.io/v1" || es.Namespace != "ns-1" ||
					es.Labels[discoveryv1.LabelServiceName] != "foo-bar-com" || es.AddressType != discoveryv1.AddressTypeIPv4 {
					t.Errorf("slice %d metadata:\n%s", i, doc)
				}
				if len(es.Ports) != 1 || *es.Ports[0].Name != tc.wantName || *es.Ports[0].Port != pods[i].Port {
					t.Errorf("slice %d ports: want name %q port %d:\n%s", i, tc.wantName, pods[i].Port, doc)
				}
				if len(es.Endpoints) != 1 || es.Endpoints[0].Addresses[0] != "127.0.0.1" ||
					es.Endpoints[0].Conditions.Ready == nil || !*es.Endpoints[0].Conditions.Ready ||
					es.Endpoints[0].TargetRef.Name != pods[i].Name {
					t.Errorf("slice %d endpoint:\n%s", i, doc)
				}
			}
		})
	}
}

func TestBackendManifestWithoutPods(t *testing.T) {
	data, err := backendManifest("ns-1", "i", "s", networkingv1.ServiceBackendPort{Number: 80}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if docs := splitDocs(t, data); len(docs) != 1 {
		t.Errorf("%d documents, want the Service alone", len(docs))
	}
}

func TestOtherManifests(t *testing.T) {
	class, err := ingressClassManifest()
	if err != nil {
		t.Fatal(err)
	}
	var ic networkingv1.IngressClass
	decode(t, string(class), &ic)
	if ic.Kind != "IngressClass" || ic.Name != IngressClass || ic.Spec.Controller != IngressController {
		t.Errorf("ingress class:\n%s", class)
	}

	secret, err := secretManifest("ns-1", "conformance-tls", []byte("CERT"), []byte("KEY"))
	if err != nil {
		t.Fatal(err)
	}
	var s corev1.Secret
	decode(t, string(secret), &s)
	if s.Type != corev1.SecretTypeTLS || string(s.Data["tls.crt"]) != "CERT" || string(s.Data["tls.key"]) != "KEY" || s.Namespace != "ns-1" {
		t.Errorf("secret:\n%s", secret)
	}

	in, err := ingressFromManifest("ns-1", pathRulesManifest)
	if err != nil {
		t.Fatal(err)
	}
	in.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "1.2.3.4"}}
	data, err := ingressManifest("ns-1", in)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "status") || strings.Contains(string(data), "creationTimestamp") {
		t.Errorf("ingress manifest carries status or null fields:\n%s", data)
	}
	var out networkingv1.Ingress
	decode(t, string(data), &out)
	if out.Kind != "Ingress" || out.APIVersion != "networking.k8s.io/v1" || out.Namespace != "ns-1" ||
		len(out.Spec.Rules) != len(in.Spec.Rules) || *out.Spec.IngressClassName != IngressClass {
		t.Errorf("ingress:\n%s", data)
	}
}
