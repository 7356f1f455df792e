package conformance

import (
	"fmt"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
)

const pathRulesManifest = `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: path-rules
  namespace: ignored
spec:
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
                  number: 9090
    - host: "named"
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service:
                name: foo-bar-com
                port:
                  name: http
    - host: "no-http"
`

func refs(ing *networkingv1.Ingress) []string {
	var out []string
	for _, r := range backendServices(ing) {
		port := r.Port.Name
		if port == "" {
			port = fmt.Sprint(r.Port.Number)
		}
		out = append(out, r.Service+":"+port)
	}
	return out
}

func TestIngressFromManifest(t *testing.T) {
	ing, err := ingressFromManifest("ns-a", pathRulesManifest)
	if err != nil {
		t.Fatal(err)
	}
	if ing.Name != "path-rules" || ing.Namespace != "ns-a" {
		t.Errorf("got %s/%s, want ns-a/path-rules", ing.Namespace, ing.Name)
	}
	if ing.Spec.IngressClassName == nil || *ing.Spec.IngressClassName != IngressClass {
		t.Errorf("class %v, want %q", ing.Spec.IngressClassName, IngressClass)
	}
	// First mention wins; a rule without http is skipped.
	if got, want := refs(ing), []string{"foo-exact:8080", "foo-prefix:8080", "foo-bar-com:http"}; !slices.Equal(got, want) {
		t.Errorf("backends %v, want %v", got, want)
	}
}

func TestIngressFromManifestKeepsClass(t *testing.T) {
	ing, err := ingressFromManifest("ns-a", "metadata:\n  name: x\nspec:\n  ingressClassName: some-invalid-class-name\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := *ing.Spec.IngressClassName; got != "some-invalid-class-name" {
		t.Errorf("class %q, want the given one", got)
	}
}

func TestIngressFromSpec(t *testing.T) {
	ing, err := ingressFromSpec("default-backend", "ns-b", `
defaultBackend:
  service:
    name: echo-service
    port:
      number: 8080
rules:
  - host: a
    http:
      paths:
        - path: /
          pathType: Prefix
          backend:
            service:
              name: other
              port:
                number: 80
`)
	if err != nil {
		t.Fatal(err)
	}
	if ing.Name != "default-backend" || ing.Namespace != "ns-b" || *ing.Spec.IngressClassName != IngressClass {
		t.Errorf("got %s/%s class %v", ing.Namespace, ing.Name, ing.Spec.IngressClassName)
	}
	if got, want := refs(ing), []string{"echo-service:8080", "other:80"}; !slices.Equal(got, want) {
		t.Errorf("backends %v, want default backend first: %v", got, want)
	}
}

func TestIngressNeedsNamespace(t *testing.T) {
	for _, ns := range []string{"", "default"} {
		if _, err := ingressFromSpec("x", ns, "{}"); err == nil {
			t.Errorf("ingressFromSpec in %q: no error", ns)
		}
		if _, err := ingressFromManifest(ns, "metadata: {name: x}"); err == nil {
			t.Errorf("ingressFromManifest in %q: no error", ns)
		}
	}
	if _, err := ingressFromManifest("ns", "spec: {}"); err == nil {
		t.Error("manifest without a name: no error")
	}
	if _, err := ingressFromSpec("x", "ns", "rules: 3"); err == nil {
		t.Error("bad spec: no error")
	}
}

func TestFirstAddress(t *testing.T) {
	tests := []struct {
		lbs  []networkingv1.IngressLoadBalancerIngress
		want string
	}{
		{nil, ""},
		{[]networkingv1.IngressLoadBalancerIngress{{}}, ""},
		{[]networkingv1.IngressLoadBalancerIngress{{}, {Hostname: "lb.example"}}, "lb.example"},
		{[]networkingv1.IngressLoadBalancerIngress{{IP: "127.0.1.2", Hostname: "h"}}, "127.0.1.2"},
		{[]networkingv1.IngressLoadBalancerIngress{{Hostname: "h"}, {IP: "10.0.0.1"}}, "h"},
	}
	for _, tc := range tests {
		if got := firstAddress(tc.lbs); got != tc.want {
			t.Errorf("firstAddress(%v) = %q, want %q", tc.lbs, got, tc.want)
		}
	}
}
