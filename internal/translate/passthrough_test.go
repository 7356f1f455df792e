package translate

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// ssl-passthrough: the host's "/" backend becomes a TCP pool on the
// HTTPS listener (created without certificates when none is there); the
// Ingress's HTTP routes are kept; other paths, a host-less rule and a
// host owned by another namespace are warned about, not passed.
func TestSSLPassthrough(t *testing.T) {
	pt := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "ssl-passthrough": "true"}
	a := simpleIngress(t, "ns", "pt", 0, pt, "pt.example", "/")
	a.Spec.Rules[0].HTTP.Paths = append(a.Spec.Rules[0].HTTP.Paths, *a.Spec.Rules[0].HTTP.Paths[0].DeepCopy())
	a.Spec.Rules[0].HTTP.Paths[1].Path = "/api"
	a.Spec.Rules = append(a.Spec.Rules, networkingv1.IngressRule{IngressRuleValue: a.Spec.Rules[0].IngressRuleValue})
	lb := onlyLB(t, Ingresses(snapshotOf(a), DefaultOptions()))
	if len(lb.Listeners) != 2 {
		t.Fatalf("listeners %+v", lb.Listeners)
	}
	https := lb.Listeners[1]
	if https.Protocol != model.ProtocolTerminatedHTTPS || len(https.Certificates) != 0 || len(https.Policies) != 0 ||
		len(https.Passthrough) != 1 || https.Passthrough[0].Host != "pt.example" || https.Passthrough[0].Source.Name != "pt" {
		t.Fatalf("https listener %+v", https)
	}
	var tcp, http *model.Pool
	for i, p := range lb.Pools {
		if p.TCP {
			tcp = &lb.Pools[i]
		} else {
			http = &lb.Pools[i]
		}
	}
	if tcp == nil || http == nil || tcp.ID != https.Passthrough[0].PoolID || tcp.ID == http.ID || tcp.Service != "web" ||
		len(tcp.Members) != len(http.Members) || len(tcp.Members) == 0 {
		t.Fatalf("pools %+v", lb.Pools)
	}
	if len(lb.Listeners[0].Policies) == 0 {
		t.Error("the Ingress's HTTP routes are gone")
	}
	res := Ingresses(snapshotOf(a), DefaultOptions())
	var why []string
	for _, p := range problemsFor(res, "pt") {
		if p.Severity != model.SeverityWarning || p.Reason != "IgnoredPassthrough" {
			t.Errorf("problem %+v", p)
		}
		why = append(why, p.Field+": "+p.Message)
	}
	if got := strings.Join(why, "\n"); len(why) != 2 || !strings.Contains(got, "paths[1]: ") || !strings.Contains(got, "rules[1].host: ") {
		t.Errorf("warnings:\n%s", got)
	}

	// Beside a terminating Ingress: one listener, its certificate and
	// policies kept, the passthrough host added.
	term := tlsIngress(t, "ns", "term", 1, map[string]string{annotation.LoadBalancer: "shared"})
	snap := snapshotOf(simpleIngress(t, "ns", "pt", 0, pt, "pt.example", "/"), term)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "ns", "tls", "a.example"))
	lb = onlyLB(t, Ingresses(snap, DefaultOptions()))
	https = lb.Listeners[1]
	if len(https.Certificates) != 1 || len(https.Policies) == 0 || len(https.Passthrough) != 1 {
		t.Errorf("shared https listener %+v", https)
	}

	// In a group shared across namespaces, another namespace's host (by
	// route or certificate) is not taken.
	thief := simpleIngress(t, "other", "thief", 2, pt, "a.example", "/")
	snap = snapshotOf(term, thief)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "ns", "tls", "a.example"))
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shared": {"*"}}
	res = Ingresses(snap, opts)
	lb = onlyLB(t, res)
	for _, l := range lb.Listeners {
		if len(l.Passthrough) != 0 {
			t.Errorf("another namespace's host passed through: %+v", l.Passthrough)
		}
	}
	found := false
	for _, p := range problemsFor(res, "thief") {
		found = found || (p.Reason == "RouteConflict" && strings.Contains(p.Message, "not passed through"))
	}
	if !found {
		t.Errorf("no conflict warning: %+v", problemsFor(res, "thief"))
	}
}
