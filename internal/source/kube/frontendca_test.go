package kube

import (
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func caGateway(ns, name string, refs ...gwv1.ObjectReference) *gwv1.Gateway {
	return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: gwv1.GatewaySpec{
		TLS: &gwv1.GatewayTLSConfig{Frontend: &gwv1.FrontendTLSConfig{
			Default: gwv1.TLSConfig{Validation: &gwv1.FrontendTLSValidation{CACertificateRefs: refs}}}}}}
}

// The client CA watches follow the Gateways: the ConfigMaps they name are
// listed (another namespace's too), a ref of another kind is not
// watched, one no Gateway names any more is dropped, and a ConfigMap an
// Ingress names too is in the snapshot once.
func TestFrontendCAsFollowGateways(t *testing.T) {
	client := fake.NewSimpleClientset(configMap("shop", "ca"), configMap("certs", "ca"), configMap("shop", "other"))
	changed := make(chan struct{}, 1)
	f := frontendCAs{watches: newNamedConfigMaps(client, changed, slog.New(slog.DiscardHandler))}
	defer f.watches.stop()
	other := gwv1.Namespace("certs")
	gws := []*gwv1.Gateway{
		caGateway("shop", "a", gwv1.ObjectReference{Kind: "ConfigMap", Name: "ca"}, gwv1.ObjectReference{Kind: "Secret", Name: "other"}),
		caGateway("shop", "b", gwv1.ObjectReference{Kind: "ConfigMap", Name: "ca", Namespace: &other}),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "plain"}},
	}
	got := f.objects(t.Context(), gws)
	if len(got) != 2 || len(f.watches.watches) != 2 {
		t.Fatalf("config maps %v, %d watches", got, len(f.watches.watches))
	}
	merged := addConfigMaps([]*corev1.ConfigMap{configMap("shop", "ca")}, got)
	if len(merged) != 2 {
		t.Fatalf("merged %d config maps, want 2", len(merged))
	}
	if got := f.objects(t.Context(), gws[2:]); len(got) != 0 || len(f.watches.watches) != 0 {
		t.Fatalf("after the Gateways went: %v, %d watches", got, len(f.watches.watches))
	}
}
