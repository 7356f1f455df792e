package lint

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
)

func TestGroupFromHost(t *testing.T) {
	for host, want := range map[string]string{
		"shop.example.com":   "shop",
		"*.apps.example.com": "apps",
		anyHost:              "shared",
		"-x-.example":        "x",
		"Shop.example":       "shop",
	} {
		if got := groupFromHost(host); got != want {
			t.Errorf("groupFromHost(%q) = %q, want %q", host, got, want)
		}
	}
}

// An existing valid group name is advised; across namespaces the flag
// that shares it is named too.
func TestGroupAdvice(t *testing.T) {
	ing := func(ns, group string) *networkingv1.Ingress {
		i := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}}
		if group != "" {
			i.Annotations = map[string]string{"pier.dev/load-balancer": group}
		}
		return i
	}
	for _, tc := range []struct {
		ings []*networkingv1.Ingress
		want string
	}{
		{[]*networkingv1.Ingress{ing("a", ""), ing("a", "")}, "annotate each of its Ingresses with pier.dev/load-balancer: shop"},
		{[]*networkingv1.Ingress{ing("a", ""), ing("a", "front")}, "annotate each of its Ingresses with pier.dev/load-balancer: front"},
		{[]*networkingv1.Ingress{ing("b", "Bad_Name"), ing("a", "")}, "pier.dev/load-balancer: shop and start pier with --shared-load-balancer shop=a,b"},
	} {
		if got := groupAdvice("shop.example", tc.ings); !strings.Contains(got, tc.want) {
			t.Errorf("%q lacks %q", got, tc.want)
		}
	}
}

// refusalReason is the first Error, counting the others; Warnings do not
// count.
func TestRefusalReason(t *testing.T) {
	ps := []model.Problem{{Severity: model.SeverityWarning, Reason: "W", Message: "w"},
		{Severity: model.SeverityError, Reason: "E1", Message: "one"}, {Severity: model.SeverityError, Reason: "E2", Message: "two"}}
	if got, want := refusalReason(ps), "E1: one (and 1 more errors)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got := refusalReason(ps[:1]); got != "not served, and no problem says why" {
		t.Errorf("%q", got)
	}
}
