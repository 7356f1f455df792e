package translate

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/htpasswd"
	"pier.dev/pier/internal/model"
)

const (
	testBcrypt = "$2b$05$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	testSHA512 = "$6$Ea1yNgy2jUg9amIr$h.OMJyaKB7QcQCFGkA52leL2i2SrycZ0WwA8tptjw7w5OOY81RkZMwE69n.wQh2Cs5nzhSPoquUgfXsgcnQN1/"
)

func authSecret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// Basic auth: the policy names the Secret and the digest of its users,
// never the users; another Ingress on the same load balancer is left
// alone; a bad or missing Secret refuses only the Ingress asking for it.
func TestBasicAuth(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shared"}
	auth := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "auth-type": "basic",
		annotation.NginxPrefix + "auth-secret": "users", annotation.NginxPrefix + "auth-realm": "Staff only"}
	file := authSecret("ns", "users", map[string]string{"auth": "# staff\nbob:" + testSHA512 + "\r\nalice:" + testBcrypt + "\n"})
	run := func(ann map[string]string, secrets ...*corev1.Secret) *Result {
		a := simpleIngress(t, "ns", "private", 0, ann, "a.example", "/admin")
		b := simpleIngress(t, "ns", "public", 1, group, "a.example", "/")
		snap := snapshotOf(a, b)
		snap.Secrets = secrets
		return Ingresses(snap, DefaultOptions())
	}
	lb := onlyLB(t, run(auth, file))
	users, err := htpasswd.FromSecret(file.Data, htpasswd.TypeFile)
	if err != nil || len(users) != 2 || users[0].Name.String() != "alice" {
		t.Fatalf("users %v, %v", users, err)
	}
	want := model.BasicAuth{Realm: "Staff only", Namespace: "ns", Secret: "users", Type: "auth-file", SHA256: htpasswd.Digest(users)}
	for _, p := range lb.Listeners[0].Policies {
		private := p.Source.Name == "private"
		if private && (p.Options == nil || p.Options.BasicAuth == nil || *p.Options.BasicAuth != want) {
			t.Errorf("private: options %+v", p.Options)
		}
		if !private && p.Options != nil {
			t.Errorf("public: options %+v", p.Options)
		}
	}
	// auth-map, and the default realm.
	m := map[string]string{annotation.NginxPrefix + "auth-type": "basic", annotation.Prefix + "auth-secret": "ns/users",
		annotation.NginxPrefix + "auth-secret-type": "auth-map", annotation.LoadBalancer: "shared"}
	lb = onlyLB(t, run(m, authSecret("ns", "users", map[string]string{"carol": testBcrypt + "\n"})))
	for _, p := range lb.Listeners[0].Policies {
		if p.Source.Name == "private" && (p.Options.BasicAuth.Realm != defaultRealm || p.Options.BasicAuth.Type != "auth-map") {
			t.Errorf("auth-map: %+v", p.Options.BasicAuth)
		}
	}

	// htpasswd's default, $apr1$ (kube-prometheus guides' htpasswd -c).
	lb = onlyLB(t, run(auth, authSecret("ns", "users", map[string]string{"auth": "prom:$apr1$Zq3.x/Ab$M68YK0YO.mONLY/uwDkP60\n"})))
	served := false
	for _, p := range lb.Listeners[0].Policies {
		served = served || (p.Source.Name == "private" && p.Options != nil && p.Options.BasicAuth != nil)
	}
	if !served {
		t.Error("$apr1$: the Ingress is not served with basic auth")
	}

	refused := func(name string, ann map[string]string, field, msg string, secrets ...*corev1.Secret) {
		t.Helper()
		res := run(ann, secrets...)
		lb := onlyLB(t, res)
		for _, p := range lb.Listeners[0].Policies {
			if p.Source.Name == "private" {
				t.Errorf("%s: the Ingress is served", name)
			}
		}
		ps := problemsFor(res, "private")
		if len(ps) != 1 || ps[0].Severity != model.SeverityError || ps[0].Field != field || !strings.Contains(ps[0].Message, msg) {
			t.Errorf("%s: problems %+v", name, ps)
		}
		if len(problemsFor(res, "public")) != 0 {
			t.Errorf("%s: public has problems", name)
		}
	}
	secretField := "metadata.annotations[" + annotation.NginxPrefix + "auth-secret]"
	refused("missing", auth, secretField, "not found")
	refused("apr1 salt of 9", auth, secretField, "a salt of 1-8 characters",
		authSecret("ns", "users", map[string]string{"auth": "alice:$apr1$r31......$HqJZimcKQFAMYayBlzkrA/\n"}))
	refused("sha1", auth, secretField, "htpasswd -B",
		authSecret("ns", "users", map[string]string{"auth": "alice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n"}))
	refused("plain", auth, secretField, "line 1",
		authSecret("ns", "users", map[string]string{"auth": "alice:secret\n"}))
	refused("no auth key", auth, secretField, "no key",
		authSecret("ns", "users", map[string]string{"users": "alice:" + testBcrypt}))
	refused("bad user", auth, secretField, "user name",
		authSecret("ns", "users", map[string]string{"auth": "al'ice:" + testBcrypt}))
	refused("twice", auth, secretField, "twice",
		authSecret("ns", "users", map[string]string{"auth": "a:" + testBcrypt + "\na:" + testSHA512}))
	refused("empty", auth, secretField, "no users", authSecret("ns", "users", map[string]string{"auth": "# nobody\n"}))
	cross := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "auth-type": "basic", annotation.NginxPrefix + "auth-secret": "other/users"}
	refused("cross namespace", cross, secretField, "other namespaces", authSecret("other", "users", map[string]string{"auth": "a:" + testBcrypt}))
	noSecret := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "auth-type": "basic"}
	refused("no auth-secret", noSecret, "metadata.annotations["+annotation.NginxPrefix+"auth-type]", "needs auth-secret")
	digest := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "auth-type": "digest", annotation.NginxPrefix + "auth-secret": "users"}
	refused("digest", digest, "metadata.annotations["+annotation.NginxPrefix+"auth-type]", "Basic credentials only", file)

	// auth-secret alone: a warning, the Ingress served without auth.
	res := run(map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "auth-secret": "users"}, file)
	if ps := problemsFor(res, "private"); len(ps) != 1 || ps[0].Severity != model.SeverityWarning {
		t.Errorf("auth-secret alone: %+v", ps)
	}
}

func TestAuthSecretReference(t *testing.T) {
	for _, c := range []struct {
		ann      map[string]string
		ns, name string
		ok       bool
	}{
		{map[string]string{annotation.NginxPrefix + "auth-type": "basic", annotation.NginxPrefix + "auth-secret": "u"}, "ns", "u", true},
		{map[string]string{annotation.NginxPrefix + "auth-type": "basic", annotation.NginxPrefix + "auth-secret": "ns/u"}, "ns", "u", true},
		{map[string]string{annotation.NginxPrefix + "auth-type": "basic", annotation.NginxPrefix + "auth-secret": "kube-system/u"}, "", "", false},
		{map[string]string{annotation.NginxPrefix + "auth-secret": "u"}, "", "", false},
		{map[string]string{annotation.Prefix + "auth-type": "basic", annotation.NginxPrefix + "auth-secret": "u;evil"}, "", "", false},
	} {
		ing := simpleIngress(t, "ns", "a", 0, c.ann, "a.example", "/")
		ns, name, ok := annotation.AuthSecret(ing)
		if ok != c.ok || (ok && (ns != c.ns || name != c.name)) {
			t.Errorf("%v: %s/%s %v", c.ann, ns, name, ok)
		}
	}
}
