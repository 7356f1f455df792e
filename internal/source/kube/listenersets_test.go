package kube

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// A v1 ListenerSet read as unstructured becomes pier's type with every
// field translation reads (a listener's fields inline, its filters kept
// to refuse them), and goes back at v1 with its status.
func TestListenerSetConversion(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: gateway.networking.k8s.io/v1
kind: ListenerSet
metadata: {name: ls, namespace: team, generation: 3}
spec:
  parentRef: {group: gateway.networking.k8s.io, kind: Gateway, name: gw, namespace: default}
  listeners:
  - name: tls
    port: 443
    protocol: HTTPS
    hostname: shop.example
    tls: {certificateRefs: [{name: shop-tls}]}
    allowedRoutes: {namespaces: {from: Same}, kinds: [{kind: HTTPRoute}]}
  - name: f
    port: 80
    protocol: HTTP
    filters: {request: [{type: ExternalAuth}]}
status:
  conditions: [{type: Accepted, status: "True", reason: Accepted, message: "", lastTransitionTime: "2026-01-02T03:04:05Z"}]
  listeners: [{name: tls, attachedRoutes: 2, supportedKinds: [{kind: HTTPRoute}], conditions: []}]
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	ls, err := ListenerSetOf(u)
	if err != nil {
		t.Fatal(err)
	}
	if p := ls.Spec.ParentRef; p.Name != "gw" || p.Namespace == nil || *p.Namespace != "default" || p.Kind == nil || *p.Kind != "Gateway" {
		t.Errorf("parentRef %+v", p)
	}
	if len(ls.Spec.Listeners) != 2 {
		t.Fatalf("listeners %+v", ls.Spec.Listeners)
	}
	l := ls.Spec.Listeners[0]
	if l.Name != "tls" || l.Port != 443 || l.Protocol != "HTTPS" || l.Hostname == nil || *l.Hostname != "shop.example" ||
		l.TLS == nil || len(l.TLS.CertificateRefs) != 1 || l.AllowedRoutes == nil || len(l.AllowedRoutes.Kinds) != 1 || l.Filters != nil {
		t.Errorf("listener %+v", l)
	}
	if len(ls.Spec.Listeners[1].Filters) == 0 {
		t.Error("filters not read")
	}
	if len(ls.Status.Listeners) != 1 || ls.Status.Listeners[0].AttachedRoutes != 2 || len(ls.Status.Conditions) != 1 {
		t.Errorf("status %+v", ls.Status)
	}
	cp := ls.DeepCopy()
	cp.Spec.Listeners[0].Name = "changed"
	cp.Status.Conditions[0].Reason = "changed"
	if ls.Spec.Listeners[0].Name != "tls" || ls.Status.Conditions[0].Reason != "Accepted" {
		t.Error("DeepCopy shares state with the original")
	}
	back, err := UnstructuredListenerSet(ls)
	if err != nil {
		t.Fatal(err)
	}
	if back.GetAPIVersion() != "gateway.networking.k8s.io/v1" || back.GetKind() != "ListenerSet" {
		t.Errorf("written as %s %s", back.GetAPIVersion(), back.GetKind())
	}
	ls2, err := ListenerSetOf(back)
	if err != nil || ls2.Status.Listeners[0].AttachedRoutes != 2 || ls2.Spec.Listeners[0].Port != 443 {
		t.Errorf("round trip %+v %v", ls2, err)
	}
}
