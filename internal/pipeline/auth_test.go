package pipeline

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// A basic-auth Secret an Ingress of ours names rebuilds like its TLS
// Secrets; the same Secret named by an Ingress that is not ours does not.
func TestAuthSecretIsReferenced(t *testing.T) {
	ing := func(name string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": "users-" + name}}}
	}
	snap := &source.Snapshot{Ingresses: []*networkingv1.Ingress{ing("ours"), ing("theirs")}}
	refs := referencesOf(snap, map[model.ObjectRef]bool{model.IngressRef("shop", "ours"): true})
	if !refs.secrets["shop/users-ours"] || refs.secrets["shop/users-theirs"] {
		t.Fatalf("secrets %v", refs.secrets)
	}
}
