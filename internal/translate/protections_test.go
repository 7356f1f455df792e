package translate

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// TestProtectionsFailClosed: an Ingress asking for a client-certificate
// check or ModSecurity is refused with the alternative, since served
// without them every client or request its author kept out gets in;
// one that turns them off is served; IgnoreProtections serves them all
// with a Warning.
func TestProtectionsFailClosed(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ann     map[string]string
		refused string // the key refused; "" when served
	}{
		{"client certificates on", map[string]string{annotation.NginxPrefix + "auth-tls-secret": "ns/ca", annotation.NginxPrefix + "auth-tls-verify-client": "on"}, annotation.NginxPrefix + "auth-tls-secret"},
		{"client certificates by default", map[string]string{annotation.NginxPrefix + "auth-tls-secret": "ns/ca", annotation.NginxPrefix + "auth-tls-verify-depth": "2"}, annotation.NginxPrefix + "auth-tls-secret"},
		{"client certificates optional", map[string]string{annotation.NginxPrefix + "auth-tls-secret": "ns/ca", annotation.NginxPrefix + "auth-tls-verify-client": "optional"}, annotation.NginxPrefix + "auth-tls-secret"},
		{"client certificates off", map[string]string{annotation.NginxPrefix + "auth-tls-secret": "ns/ca", annotation.NginxPrefix + "auth-tls-verify-client": "off"}, ""},
		{"verify without a secret", map[string]string{annotation.NginxPrefix + "auth-tls-verify-client": "on"}, ""},
		{"modsecurity", map[string]string{annotation.NginxPrefix + "enable-modsecurity": "true"}, annotation.NginxPrefix + "enable-modsecurity"},
		{"owasp rules", map[string]string{annotation.NginxPrefix + "enable-owasp-core-rules": "TRUE"}, annotation.NginxPrefix + "enable-owasp-core-rules"},
		{"modsecurity off", map[string]string{annotation.NginxPrefix + "enable-modsecurity": "false"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ing := simpleIngress(t, "ns", "a", 0, tc.ann, "a.example", "/")
			other := simpleIngress(t, "ns", "b", 0, nil, "b.example", "/")
			res := Ingresses(snapshotOf(ing, other), DefaultOptions())
			if _, ok := res.Accepted[model.IngressRef("ns", "b")]; !ok {
				t.Fatal("another Ingress of the namespace was not served")
			}
			_, served := res.Accepted[model.IngressRef("ns", "a")]
			var refusal *model.Problem
			for _, p := range problemsFor(res, "a") {
				if p.Reason == "ProtectionRefused" {
					refusal = &p
				}
			}
			if tc.refused == "" {
				if !served || refusal != nil {
					t.Fatalf("served %v, refusal %+v: want served", served, refusal)
				}
				return
			}
			if served || refusal == nil || refusal.Severity != model.SeverityError ||
				!strings.Contains(refusal.Field, strings.TrimPrefix(tc.refused, annotation.NginxPrefix)) ||
				!strings.Contains(refusal.Message, "--ignore-protection-annotations") || !strings.Contains(refusal.Message, " or keep the Ingress on ingress-nginx") {
				t.Fatalf("served %v, refusal %+v: want refused on %s with the alternative", served, refusal, tc.refused)
			}

			opts := DefaultOptions()
			opts.IgnoreProtections = true
			res = Ingresses(snapshotOf(ing), opts)
			if _, ok := res.Accepted[model.IngressRef("ns", "a")]; !ok {
				t.Fatal("IgnoreProtections: still refused")
			}
			warned := false
			for _, p := range problemsFor(res, "a") {
				warned = warned || (p.Severity == model.SeverityWarning && strings.Contains(p.Message, "ignored (--ignore-protection-annotations)"))
			}
			if !warned {
				t.Fatalf("IgnoreProtections: no Warning in %+v", problemsFor(res, "a"))
			}
		})
	}
}
