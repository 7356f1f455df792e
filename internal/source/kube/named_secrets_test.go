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
)

func authIngress(ns, name, secret string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{
		"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": secret}}}
}

func opaque(ns, name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"auth": []byte("a:b")}}
}

// The auth-secret watches follow the Ingresses: a named Secret is listed,
// another Secret of the namespace is not, a Secret of another namespace
// is never watched, an update of a watched Secret notifies, and a Secret
// no Ingress names any more is dropped.
func TestAuthSecretsFollowIngresses(t *testing.T) {
	client := fake.NewSimpleClientset(opaque("shop", "users"), opaque("shop", "db-password"), opaque("kube-system", "users"))
	changed := make(chan struct{}, 1)
	a := newAuthSecrets(client, changed, slog.New(slog.DiscardHandler))
	defer a.stop()
	ctx := t.Context()
	got := a.objects(ctx, []*networkingv1.Ingress{authIngress("shop", "admin", "users"),
		authIngress("shop", "sneaky", "kube-system/users"), {ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "plain"}}})
	if len(got) != 1 || got[0].Namespace != "shop" || got[0].Name != "users" {
		t.Fatalf("secrets %v", names(got))
	}
	if len(a.watches) != 1 {
		t.Fatalf("%d watches", len(a.watches))
	}
	drain(changed)
	updated := opaque("shop", "users")
	updated.Data["auth"] = []byte("a:c")
	updated.ResourceVersion = "2"
	if _, err := client.CoreV1().Secrets("shop").Update(context.Background(), updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("no notification for the watched Secret's update")
	}
	if got := a.objects(ctx, nil); len(got) != 0 || len(a.watches) != 0 {
		t.Fatalf("after the Ingress went: secrets %v, %d watches", names(got), len(a.watches))
	}
}

func names(list []*corev1.Secret) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func drain(ch chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// proxy-ssl-secret is watched the same way: by name, in the Ingress's
// own namespace only.
func TestProxySSLSecretsWatched(t *testing.T) {
	client := fake.NewSimpleClientset(opaque("shop", "upstream-ca"), opaque("kube-system", "upstream-ca"))
	a := newAuthSecrets(client, make(chan struct{}, 1), slog.New(slog.DiscardHandler))
	defer a.stop()
	ing := func(name, secret string) *networkingv1.Ingress {
		return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Annotations: map[string]string{
			"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS", "nginx.ingress.kubernetes.io/proxy-ssl-secret": secret}}}
	}
	got := a.objects(t.Context(), []*networkingv1.Ingress{ing("api", "shop/upstream-ca"), ing("sneaky", "kube-system/upstream-ca")})
	if len(got) != 1 || got[0].Namespace != "shop" || got[0].Name != "upstream-ca" || len(a.watches) != 1 {
		t.Fatalf("secrets %v, %d watches", names(got), len(a.watches))
	}
}
