package translate

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

func proxySSLSecret(t *testing.T, ns, name string, ca, client bool) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque, Data: map[string][]byte{}}
	if ca {
		crt, _, err := tlscert.SelfSigned([]string{"ca.example"}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		s.Data["ca.crt"] = crt
	}
	if client {
		crt, key, err := tlscert.SelfSigned([]string{"client.example"}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey] = crt, key
	}
	return s
}

// proxy-ssl-*: the pool of an HTTPS backend carries the verification,
// the name (default the Service's DNS name), SNI and the digests of the
// Secret's CA and client certificate; the Secret's bytes never reach
// the model. A bad value or Secret refuses only that Ingress.
func TestProxySSL(t *testing.T) {
	base := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "backend-protocol": "HTTPS"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[annotation.NginxPrefix+kv[i]] = kv[i+1]
		}
		return m
	}
	run := func(ann map[string]string, secrets ...*corev1.Secret) *Result {
		a := simpleIngress(t, "ns", "tls", 0, ann, "a.example", "/")
		b := simpleIngress(t, "ns", "other", 1, map[string]string{annotation.LoadBalancer: "shared"}, "b.example", "/")
		b.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "other"
		snap := snapshotOf(a, b)
		snap.Secrets = secrets
		return Ingresses(snap, DefaultOptions())
	}
	poolOf := func(res *Result, svc string) *model.Pool {
		t.Helper()
		for i, p := range onlyLB(t, res).Pools {
			if p.Service == svc {
				return &onlyLB(t, res).Pools[i]
			}
		}
		t.Fatalf("no pool for %s", svc)
		return nil
	}
	full := proxySSLSecret(t, "ns", "upstream", true, true)
	res := run(with("proxy-ssl-verify", "on", "proxy-ssl-secret", "ns/upstream", "proxy-ssl-server-name", "on"), full)
	u := poolOf(res, "web").UpstreamTLS
	ca, _ := tlscert.ParseCA(full.Data["ca.crt"])
	pair, _ := tlscert.Parse(full.Data["tls.crt"], full.Data["tls.key"])
	want := model.UpstreamTLS{Verify: true, SNI: true, Name: "web.ns.svc", Namespace: "ns", Secret: "upstream",
		CASHA256: ca.SHA256, ClientSHA256: pair.SHA256}
	if u == nil || *u != want {
		t.Errorf("upstream %+v, want %+v", u, want)
	}
	if o := poolOf(res, "other").UpstreamTLS; o != nil {
		t.Errorf("other Ingress's pool: %+v", o)
	}
	// proxy-ssl-name, and a client certificate alone with verify off.
	res = run(with("proxy-ssl-name", "api.internal", "proxy-ssl-secret", "upstream", "proxy-ssl-server-name", "on"),
		proxySSLSecret(t, "ns", "upstream", false, true))
	if u := poolOf(res, "web").UpstreamTLS; u == nil || u.Verify || u.Name != "api.internal" || u.CASHA256 != "" || u.ClientSHA256 == "" {
		t.Errorf("client only: %+v", u)
	}

	refused := func(name string, ann map[string]string, key, msg string, secrets ...*corev1.Secret) {
		t.Helper()
		res := run(ann, secrets...)
		for _, p := range onlyLB(t, res).Listeners[0].Policies {
			if p.Source.Name == "tls" {
				t.Errorf("%s: the Ingress is served", name)
			}
		}
		ps := problemsFor(res, "tls")
		if len(ps) != 1 || ps[0].Severity != model.SeverityError || ps[0].Field != "metadata.annotations["+annotation.NginxPrefix+key+"]" ||
			!strings.Contains(ps[0].Message, msg) {
			t.Errorf("%s: problems %+v", name, ps)
		}
	}
	refused("verify without secret", with("proxy-ssl-verify", "on"), "proxy-ssl-verify", "needs proxy-ssl-secret")
	refused("verify without ca.crt", with("proxy-ssl-verify", "on", "proxy-ssl-secret", "upstream"), "proxy-ssl-secret", "needs the key ca.crt",
		proxySSLSecret(t, "ns", "upstream", false, true))
	refused("missing secret", with("proxy-ssl-verify", "on", "proxy-ssl-secret", "upstream"), "proxy-ssl-secret", "not found")
	refused("other namespace", with("proxy-ssl-verify", "on", "proxy-ssl-secret", "other/upstream"), "proxy-ssl-secret", "other namespaces",
		proxySSLSecret(t, "other", "upstream", true, false))
	bad := proxySSLSecret(t, "ns", "upstream", true, false)
	bad.Data["ca.crt"] = []byte("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
	refused("bad ca.crt", with("proxy-ssl-verify", "on", "proxy-ssl-secret", "upstream"), "proxy-ssl-secret", "ca.crt", bad)
	half := proxySSLSecret(t, "ns", "upstream", true, true)
	delete(half.Data, "tls.key")
	refused("client cert without key", with("proxy-ssl-verify", "on", "proxy-ssl-secret", "upstream"), "proxy-ssl-secret", "client certificate", half)
	refused("bad verify", with("proxy-ssl-verify", "true"), "proxy-ssl-verify", "proxy-ssl-verify")
	refused("bad name", with("proxy-ssl-name", "api.internal;evil"), "proxy-ssl-name", "proxy-ssl-name")
	refused("bad server-name", with("proxy-ssl-server-name", "on;evil"), "proxy-ssl-server-name", "proxy-ssl-server-name")
	refused("bad secret", with("proxy-ssl-secret", "ns/upstream;evil"), "proxy-ssl-secret", "proxy-ssl-secret")

	// A CA alone with verify off (harmless in ingress-nginx): served, with
	// a warning that nothing is used.
	res = run(with("proxy-ssl-secret", "upstream"), proxySSLSecret(t, "ns", "upstream", true, false))
	if u := poolOf(res, "web").UpstreamTLS; u == nil || u.Verify || u.CASHA256 != "" || u.ClientSHA256 != "" {
		t.Errorf("CA alone, verify off: %+v", u)
	}
	if ps := problemsFor(res, "tls"); len(ps) != 1 || ps[0].Severity != model.SeverityWarning || !strings.Contains(ps[0].Message, "nothing to do") {
		t.Errorf("CA alone, verify off: problems %+v", ps)
	}

	// An expired CA or client certificate is served, with a warning.
	a := simpleIngress(t, "ns", "tls", 0, with("proxy-ssl-verify", "on", "proxy-ssl-secret", "upstream"), "a.example", "/")
	snap := snapshotOf(a)
	snap.Secrets = []*corev1.Secret{full}
	opts := DefaultOptions()
	opts.Now = time.Now().Add(2 * time.Hour)
	ps := problemsFor(Ingresses(snap, opts), "tls")
	if len(ps) != 1 || ps[0].Reason != "ExpiredCertificate" || ps[0].Severity != model.SeverityWarning {
		t.Errorf("expired: problems %+v", ps)
	}

	// Without TLS to the members: a warning, nothing set.
	plain := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "proxy-ssl-verify": "on"}
	res = run(plain)
	if u := poolOf(res, "web").UpstreamTLS; u != nil {
		t.Errorf("HTTP pool: %+v", u)
	}
	if ps := problemsFor(res, "tls"); len(ps) != 1 || ps[0].Severity != model.SeverityWarning || !strings.Contains(ps[0].Message, "HTTPS or GRPCS only") {
		t.Errorf("HTTP pool: problems %+v", ps)
	}
	// The sources watch the Secret only in the Ingress's own namespace.
	ing := simpleIngress(t, "ns", "x", 0, with("proxy-ssl-secret", "ns/upstream"), "a.example", "/")
	if refs := annotation.Secrets(ing); len(refs) != 1 || refs[0] != (annotation.Object{Namespace: "ns", Name: "upstream"}) {
		t.Errorf("named secrets %v", refs)
	}
	ing.Annotations[annotation.NginxPrefix+"proxy-ssl-secret"] = "other/upstream"
	if refs := annotation.Secrets(ing); len(refs) != 0 {
		t.Errorf("cross-namespace named secrets %v", refs)
	}
}
