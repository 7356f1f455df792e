package pipeline

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// A Gateway API spec or a Namespace's labels rebuild; a status written
// back (pier's own) does not; the Services an HTTPRoute of one of our
// Gateways names become references.
func TestClassifyGatewayAPI(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw", ResourceVersion: "1"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r", ResourceVersion: "1"}}
	route.Spec.ParentRefs = []gwv1.ParentReference{{Name: "gw"}}
	route.Spec.Rules = []gwv1.HTTPRouteRule{{BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
		BackendObjectReference: gwv1.BackendObjectReference{Name: "web"}}}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", ResourceVersion: "1"}}
	prev := &source.Snapshot{Gateways: []*gwv1.Gateway{gw}, HTTPRoutes: []*gwv1.HTTPRoute{route}, Namespaces: []*corev1.Namespace{ns}}

	statusOnly := gw.DeepCopy()
	statusOnly.ResourceVersion = "2"
	statusOnly.Status.Conditions = []metav1.Condition{{Type: "Accepted", Status: "True"}}
	newSpec := gw.DeepCopy()
	newSpec.ResourceVersion = "3"
	newSpec.Spec.Listeners = []gwv1.Listener{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}}
	relabelled := ns.DeepCopy()
	relabelled.ResourceVersion = "2"
	relabelled.Labels = map[string]string{"team": "blue"}
	grant := &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "backends", Name: "g", ResourceVersion: "1"}}
	for _, tc := range []struct {
		name   string
		next   *source.Snapshot
		want   string
		status bool
	}{
		{"status only", &source.Snapshot{Gateways: []*gwv1.Gateway{statusOnly}, HTTPRoutes: prev.HTTPRoutes, Namespaces: prev.Namespaces}, "", true},
		{"nothing", &source.Snapshot{Gateways: prev.Gateways, HTTPRoutes: prev.HTTPRoutes, Namespaces: prev.Namespaces}, "", false},
		{"spec", &source.Snapshot{Gateways: []*gwv1.Gateway{newSpec}, HTTPRoutes: prev.HTTPRoutes, Namespaces: prev.Namespaces}, ReasonGateway, true},
		{"route deleted", &source.Snapshot{Gateways: prev.Gateways, Namespaces: prev.Namespaces}, ReasonGateway, true},
		{"namespace labels", &source.Snapshot{Gateways: prev.Gateways, HTTPRoutes: prev.HTTPRoutes, Namespaces: []*corev1.Namespace{relabelled}}, ReasonGateway, true},
		{"namespace without routes", &source.Snapshot{Gateways: prev.Gateways, HTTPRoutes: prev.HTTPRoutes,
			Namespaces: []*corev1.Namespace{ns, {ObjectMeta: metav1.ObjectMeta{Name: "tenant", ResourceVersion: "1"}}}}, "", false},
		{"reference grant", &source.Snapshot{Gateways: prev.Gateways, HTTPRoutes: prev.HTTPRoutes, Namespaces: prev.Namespaces,
			ReferenceGrants: []*gwv1beta1.ReferenceGrant{grant}}, ReasonGateway, true},
	} {
		e := classify(prev, tc.next, references{}, "")
		if e.rebuild != tc.want || e.status != tc.status {
			t.Errorf("%s: rebuild %q status %v, want %q %v", tc.name, e.rebuild, e.status, tc.want, tc.status)
		}
	}
	refs := referencesOf(prev, map[model.ObjectRef]bool{{Kind: model.KindGateway, Namespace: "default", Name: "gw"}: true})
	if !refs.services["default/web"] {
		t.Errorf("the route's Service is not a reference: %v", refs.services)
	}
	other := gwv1.Namespace("backends")
	route.Spec.Rules[0].BackendRefs[0].Namespace = &other
	refs = referencesOf(prev, map[model.ObjectRef]bool{{Kind: model.KindGateway, Namespace: "default", Name: "gw"}: true})
	if !refs.services["backends/web"] {
		t.Errorf("a cross-namespace backendRef is not a reference in its namespace: %v", refs.services)
	}
	if refs := referencesOf(prev, map[model.ObjectRef]bool{}); refs.services["default/web"] {
		t.Error("a route of a Gateway that is not ours made a reference")
	}
}

// A custom-headers ConfigMap an Ingress of ours names rebuilds when its
// data changes or it goes; one no Ingress of ours names does not.
func TestClassifyConfigMaps(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "web", Name: "h", ResourceVersion: "1"}, Data: map[string]string{"X-A": "1"}}
	changedData := cm.DeepCopy()
	changedData.ResourceVersion, changedData.Data["X-A"] = "2", "2"
	prev := &source.Snapshot{ConfigMaps: []*corev1.ConfigMap{cm}}
	for _, tc := range []struct {
		name string
		next []*corev1.ConfigMap
		want string
	}{{"same", []*corev1.ConfigMap{cm.DeepCopy()}, ""}, {"data", []*corev1.ConfigMap{changedData}, ReasonConfigMap}, {"deleted", nil, ReasonConfigMap}} {
		refs := references{configMaps: nameSet{"web/h": true}}
		if e := classify(prev, &source.Snapshot{ConfigMaps: tc.next}, refs, ""); e.rebuild != tc.want {
			t.Errorf("%s: rebuild %q, want %q", tc.name, e.rebuild, tc.want)
		}
		if e := classify(prev, &source.Snapshot{ConfigMaps: tc.next}, references{}, ""); e.rebuild != "" {
			t.Errorf("%s, not referenced: rebuild %q", tc.name, e.rebuild)
		}
	}
}

// The ConfigMaps one of our Gateways names as client CAs are references
// (so a new or changed one rebuilds, TestClassifyConfigMaps); those of
// a Gateway that is not ours are not.
func TestClassifyFrontendCAs(t *testing.T) {
	shared := gwv1.Namespace("shared")
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{
		TLS: &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{
			Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{CACertificateRefs: []gwv1.ObjectReference{{Kind: "ConfigMap", Name: "ca"}}}},
			PerPort: []gwv1.TLSPortConfig{{Port: 8443, TLS: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{
				CACertificateRefs: []gwv1.ObjectReference{{Kind: "ConfigMap", Name: "ca2", Namespace: &shared}}}}}}}}}}
	snap := &source.Snapshot{Gateways: []*gwv1.Gateway{gw}}
	refs := referencesOf(snap, map[model.ObjectRef]bool{{Kind: model.KindGateway, Namespace: "default", Name: "gw"}: true})
	if !refs.configMaps["default/ca"] || !refs.configMaps["shared/ca2"] || len(refs.configMaps) != 2 {
		t.Errorf("references %v", refs.configMaps)
	}
	if refs := referencesOf(snap, map[model.ObjectRef]bool{}); len(refs.configMaps) != 0 {
		t.Errorf("a Gateway that is not ours made references %v", refs.configMaps)
	}
}

// The Secret one of our Gateways presents to its backends is a reference
// (a new or renewed certificate rebuilds), in the namespace it names.
func TestClassifyBackendClientCertificate(t *testing.T) {
	shared := gwv1.Namespace("shared")
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{
		TLS: &gwv1.GatewayTLSConfig{Backend: &gwv1.GatewayBackendTLS{
			ClientCertificateRef: &gwv1.SecretObjectReference{Name: "client", Namespace: &shared}}}}}
	snap := &source.Snapshot{Gateways: []*gwv1.Gateway{gw}}
	refs := referencesOf(snap, map[model.ObjectRef]bool{{Kind: model.KindGateway, Namespace: "default", Name: "gw"}: true})
	if !refs.secrets["shared/client"] || len(refs.secrets) != 1 {
		t.Errorf("references %v", refs.secrets)
	}
	if refs := referencesOf(snap, map[model.ObjectRef]bool{}); len(refs.secrets) != 0 {
		t.Errorf("a Gateway that is not ours made references %v", refs.secrets)
	}
}
