package kube

import (
	"context"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"pier.dev/pier/internal/source"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func headersIngress(ns, name, ref string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
		"nginx.ingress.kubernetes.io/custom-headers": ref}}}
}

func configMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"X-A": "1"}}
}

// The custom-headers watches follow the Ingresses, as the auth-secret
// ones: the named ConfigMap is listed, another of the namespace is not,
// one of another namespace is never watched, an update notifies, and a
// ConfigMap no Ingress names any more is dropped.
func TestConfigMapsFollowIngresses(t *testing.T) {
	client := fake.NewSimpleClientset(configMap("shop", "headers"), configMap("shop", "dashboards"), configMap("kube-system", "headers"))
	changed := make(chan struct{}, 1)
	n := newNamedConfigMaps(client, changed, slog.New(slog.DiscardHandler))
	defer n.stop()
	ctx := t.Context()
	got := n.objects(ctx, []*networkingv1.Ingress{headersIngress("shop", "site", "headers"),
		headersIngress("shop", "sneaky", "kube-system/headers"), {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "plain"}}})
	if len(got) != 1 || got[0].Namespace != "shop" || got[0].Name != "headers" || len(n.watches) != 1 {
		t.Fatalf("config maps %v, %d watches", got, len(n.watches))
	}
	drain(changed)
	updated := configMap("shop", "headers")
	updated.Data["X-A"], updated.ResourceVersion = "2", "2"
	if _, err := client.CoreV1().ConfigMaps("shop").Update(context.Background(), updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification for the watched ConfigMap's update")
	}
	if got := n.objects(ctx, nil); len(got) != 0 || len(n.watches) != 0 {
		t.Fatalf("after the Ingress went: config maps %v, %d watches", got, len(n.watches))
	}
}

// A BackendTLSPolicy's CA ConfigMaps are watched by name in the policy's
// namespace (a ref of another kind is not read), and dropped when no
// policy names them; one an Ingress names too is listed once.
func TestConfigMapsFollowBackendTLSPolicies(t *testing.T) {
	client := fake.NewSimpleClientset(configMap("shop", "ca"), configMap("shop", "other"))
	n := newPolicyConfigMaps(client, make(chan struct{}, 1), slog.New(slog.DiscardHandler))
	defer n.stop()
	policy := &gwv1.BackendTLSPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "p"},
		Spec: gwv1.BackendTLSPolicySpec{Validation: gwv1.BackendTLSPolicyValidation{CACertificateRefs: []gwv1.LocalObjectReference{
			{Group: "", Kind: "ConfigMap", Name: "ca"}, {Group: "", Kind: "Secret", Name: "other"}}}}}
	got := n.objectsNamed(t.Context(), source.BackendTLSCAConfigMaps([]*gwv1.BackendTLSPolicy{policy}))
	if len(got) != 1 || got[0].Name != "ca" || len(n.watches) != 1 {
		t.Fatalf("config maps %v, %d watches", got, len(n.watches))
	}
	if both := addConfigMaps([]*corev1.ConfigMap{configMap("shop", "ca")}, got); len(both) != 1 {
		t.Errorf("a ConfigMap named twice listed %d times", len(both))
	}
	if got := n.objectsNamed(t.Context(), source.BackendTLSCAConfigMaps(nil)); len(got) != 0 || len(n.watches) != 0 {
		t.Fatalf("after the policy went: config maps %v, %d watches", got, len(n.watches))
	}
}
