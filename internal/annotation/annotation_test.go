package annotation

import (
	"go/build"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkingv1 "k8s.io/api/networking/v1"
)

func ingress(ann map[string]string) *networkingv1.Ingress {
	return &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: ann}}
}

// TestSecrets: the Secrets an Ingress names are those of its own
// namespace, valid names, auth-secret only with auth-type basic; pier.dev/
// wins over ingress-nginx's prefix.
func TestSecrets(t *testing.T) {
	for _, c := range []struct {
		name string
		ann  map[string]string
		want []Object
	}{
		{"none", nil, nil},
		{"auth-secret with basic", map[string]string{NginxPrefix + "auth-type": "basic", NginxPrefix + "auth-secret": "users"},
			[]Object{{Namespace: "shop", Name: "users"}}},
		{"auth-secret without basic", map[string]string{NginxPrefix + "auth-secret": "users"}, nil},
		{"auth-secret of another namespace", map[string]string{NginxPrefix + "auth-type": "basic", NginxPrefix + "auth-secret": "other/users"}, nil},
		{"auth-secret of its own namespace, spelled out", map[string]string{NginxPrefix + "auth-type": "basic", NginxPrefix + "auth-secret": "shop/users"},
			[]Object{{Namespace: "shop", Name: "users"}}},
		{"auth-secret not a name", map[string]string{NginxPrefix + "auth-type": "basic", NginxPrefix + "auth-secret": "us;ers"}, nil},
		{"pier.dev/ wins", map[string]string{Prefix + "auth-type": "basic", NginxPrefix + "auth-type": "digest", Prefix + "auth-secret": "a", NginxPrefix + "auth-secret": "b"},
			[]Object{{Namespace: "shop", Name: "a"}}},
		{"all three", map[string]string{NginxPrefix + "auth-type": "basic", NginxPrefix + "auth-secret": "users",
			NginxPrefix + "proxy-ssl-secret": "upstream", AuthURLCASecret: "ca"},
			[]Object{{Namespace: "shop", Name: "users"}, {Namespace: "shop", Name: "upstream"}, {Namespace: "shop", Name: "ca"}}},
		{"auth-url-ca-secret with a namespace", map[string]string{AuthURLCASecret: "other/ca"}, nil},
	} {
		if got := Secrets(ingress(c.ann)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestConfigMaps: custom-headers of the Ingress's own namespace only.
func TestConfigMaps(t *testing.T) {
	for v, want := range map[string][]Object{
		"hdrs": {{Namespace: "shop", Name: "hdrs"}}, "shop/hdrs": {{Namespace: "shop", Name: "hdrs"}},
		"other/hdrs": nil, "a;b": nil, "Bad_Name/x": nil, "": nil,
	} {
		if got := ConfigMaps(ingress(map[string]string{NginxPrefix + "custom-headers": v})); !slices.Equal(got, want) {
			t.Errorf("custom-headers %q: %v, want %v", v, got, want)
		}
	}
}

// TestCheckObjectName says what is wrong, never echoing the value.
func TestCheckObjectName(t *testing.T) {
	for _, ok := range []string{"users", "a.b-c", "ns/users"} {
		if err := CheckObjectName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Users", "a;b", "ns/", "n.s/users", "x/y/z"} {
		err := CheckObjectName(bad)
		if err == nil {
			t.Errorf("%q accepted", bad)
			continue
		}
		if bad != "" && strings.Contains(err.Error(), bad) {
			t.Errorf("%q: the error repeats the value: %v", bad, err)
		}
	}
}

// belowTranslate are the only packages of pier's this one may import:
// the value types and validators the parsers type with, none of which
// imports translate or the sources.
var belowTranslate = map[string]bool{
	"pier.dev/pier/internal/encode":   true,
	"pier.dev/pier/internal/htpasswd": true, // the auth-secret-type names
	"pier.dev/pier/internal/model":    true,
}

// TestBelowTranslate: this package is what the sources may import, so it
// imports nothing of pier's that translates.
func TestBelowTranslate(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, "pier.dev/") && !belowTranslate[imp] {
			t.Errorf("imports %s", imp)
		}
	}
}
