package gatewayapi

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/tlscert"
)

func caConfigMap(t *testing.T, ns, name string) *corev1.ConfigMap {
	t.Helper()
	crt, _, err := tlscert.SelfSigned([]string{name + ".ca"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"ca.crt": string(crt)}}
}

// frontendSnap is a Gateway with an HTTP listener on 80 and HTTPS
// listeners on 443 and 8443 (the latter two on 8443), whose
// spec.tls.frontend is frontend, with ConfigMaps ca (default), ca2 and
// other/ca (other namespace), bad (no ca.crt) and junk (not PEM).
func frontendSnap(t *testing.T, frontend, extra string) *source.Snapshot {
	t.Helper()
	tls := "    tls: {certificateRefs: [{name: tls}]}\n"
	snap := gatewaySnap(t, gatewayClassDoc+"---\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  gatewayClassName: pier\n"+
		"  tls:\n    frontend:\n"+frontend+"  listeners:\n"+
		"  - {name: http, port: 80, protocol: HTTP}\n"+
		"  - name: https\n    port: 443\n    protocol: HTTPS\n"+tls+
		"  - name: alt-a\n    port: 8443\n    protocol: HTTPS\n    hostname: a.example\n"+tls+
		"  - name: alt-b\n    port: 8443\n    protocol: HTTPS\n    hostname: b.example\n"+tls+extra)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "tls", "a.example", "b.example"))
	bad := caConfigMap(t, "default", "bad")
	bad.Data = map[string]string{"tls.crt": bad.Data["ca.crt"]}
	junk := caConfigMap(t, "default", "junk")
	junk.Data["ca.crt"] = "not a certificate"
	snap.ConfigMaps = append(snap.ConfigMaps, caConfigMap(t, "default", "ca"), caConfigMap(t, "default", "ca2"),
		caConfigMap(t, "other", "ca"), bad, junk)
	return snap
}

func listenerStatus(t *testing.T, st gwv1.GatewayStatus, name string) gwv1.ListenerStatus {
	t.Helper()
	for _, l := range st.Listeners {
		if string(l.Name) == name {
			return l
		}
	}
	t.Fatalf("no listener %s", name)
	return gwv1.ListenerStatus{}
}

func modelListener(lb *model.LoadBalancer, port int) *model.Listener {
	for i := range lb.Listeners {
		if lb.Listeners[i].Port == port {
			return &lb.Listeners[i]
		}
	}
	return nil
}

// Client certificate validation: the perPort entry of a port, else the
// default, on the HTTPS listeners only; a ref that does not resolve
// gives ResolvedRefs=False with the spec's reason on every HTTPS
// listener of its port, and when none resolves, Accepted=False
// (NoValidCACertificate) and no model listener, while the other ports
// serve; AllowInsecureFallback is Optional and the Gateway's
// InsecureFrontendValidationMode condition.
func TestGatewayFrontendValidation(t *testing.T) {
	const defaultCA = "      default: {validation: {caCertificateRefs: [{kind: ConfigMap, group: \"\", name: ca}]}}\n"
	perPort := func(validation string) string {
		return "      perPort:\n      - port: 8443\n        tls: {validation: " + validation + "}\n"
	}
	type want struct {
		reason443, reason8443 string // ResolvedRefs reason; "" resolved
		served443, served8443 bool
		cas443, cas8443       []string // namespace/name of the CAs
		optional8443          bool
		insecure              bool
	}
	ok := want{served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"default/ca"}}
	cases := []struct {
		name, frontend, extra string
		want                  want
	}{
		{"default on every HTTPS port", defaultCA, "", ok},
		{"per port overrides the default", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: ca2}]}`), "",
			want{served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"default/ca2"}}},
		{"per port only", "      default: {}\n" + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: ca2}]}`), "",
			want{served443: true, served8443: true, cas8443: []string{"default/ca2"}}},
		{"insecure fallback", defaultCA + perPort(`{mode: AllowInsecureFallback, caCertificateRefs: [{kind: ConfigMap, group: "", name: ca2}]}`), "",
			want{served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"default/ca2"}, optional8443: true, insecure: true}},
		{"two refs make one bundle", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: ca}, {kind: ConfigMap, group: "", name: ca2}]}`), "",
			want{served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"default/ca", "default/ca2"}}},
		{"missing config map", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: nope}]}`), "",
			want{reason8443: "InvalidCACertificateRef", served443: true, cas443: []string{"default/ca"}}},
		{"no ca.crt", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: bad}]}`), "",
			want{reason8443: "InvalidCACertificateRef", served443: true, cas443: []string{"default/ca"}}},
		{"not a certificate", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: junk}]}`), "",
			want{reason8443: "InvalidCACertificateRef", served443: true, cas443: []string{"default/ca"}}},
		{"another kind", defaultCA + perPort(`{caCertificateRefs: [{kind: Secret, group: "", name: tls}]}`), "",
			want{reason8443: "InvalidCACertificateKind", served443: true, cas443: []string{"default/ca"}}},
		{"another namespace without grant", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: ca, namespace: other}]}`), "",
			want{reason8443: "RefNotPermitted", served443: true, cas443: []string{"default/ca"}}},
		{"another namespace with grant", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: ca, namespace: other}]}`),
			"---\nkind: ReferenceGrant\nmetadata: {name: g, namespace: other}\nspec:\n  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}]\n  to: [{group: \"\", kind: ConfigMap}]\n",
			want{served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"other/ca"}}},
		{"one of two refs fails: served with the other", defaultCA + perPort(`{caCertificateRefs: [{kind: ConfigMap, group: "", name: nope}, {kind: ConfigMap, group: "", name: ca2}]}`), "",
			want{reason8443: "InvalidCACertificateRef", served443: true, served8443: true, cas443: []string{"default/ca"}, cas8443: []string{"default/ca2"}}},
		{"invalid default", "      default: {validation: {caCertificateRefs: [{kind: ConfigMap, group: \"\", name: nope}]}}\n", "",
			want{reason443: "InvalidCACertificateRef", reason8443: "InvalidCACertificateRef"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(frontendSnap(t, tc.frontend, tc.extra), gatewayOpts())
			st := res.Gateway.Gateways[gatewayRef("default", "gw")]
			if c := findCondition(t, st.Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
				t.Fatalf("Gateway not accepted: %+v", c)
			}
			// The HTTP listener is never affected.
			http := listenerStatus(t, st, "http")
			if c := findCondition(t, http.Conditions, "Accepted"); c.Status != metav1.ConditionTrue {
				t.Errorf("http listener: %+v", c)
			}
			for _, l := range []struct {
				names  []string
				port   int
				reason string
				served bool
				cas    []string
			}{{[]string{"https"}, 443, tc.want.reason443, tc.want.served443, tc.want.cas443},
				{[]string{"alt-a", "alt-b"}, 8443, tc.want.reason8443, tc.want.served8443, tc.want.cas8443}} {
				for _, name := range l.names {
					ls := listenerStatus(t, st, name)
					resolved := findCondition(t, ls.Conditions, "ResolvedRefs")
					accepted := findCondition(t, ls.Conditions, "Accepted")
					if (l.reason == "") != (resolved.Status == metav1.ConditionTrue) || (l.reason != "" && resolved.Reason != l.reason) {
						t.Errorf("%s ResolvedRefs %s/%s (%s), want reason %q", name, resolved.Status, resolved.Reason, resolved.Message, l.reason)
					}
					if l.reason != "" && !strings.Contains(resolved.Message, "caCertificateRefs") {
						t.Errorf("%s: message %q names no ref", name, resolved.Message)
					}
					if l.served != (accepted.Status == metav1.ConditionTrue) || (!l.served && accepted.Reason != "NoValidCACertificate") {
						t.Errorf("%s Accepted %s/%s, served %v", name, accepted.Status, accepted.Reason, l.served)
					}
				}
				if len(res.LoadBalancers) != 1 {
					t.Fatalf("%d load balancers", len(res.LoadBalancers))
				}
				ml := modelListener(res.LoadBalancers[0], l.port)
				if (ml != nil) != l.served {
					t.Fatalf("port %d: model listener %v, want served %v", l.port, ml != nil, l.served)
				}
				if ml == nil {
					continue
				}
				var got []string
				if cv := ml.ClientValidation; cv != nil {
					for _, ca := range cv.CAs {
						got = append(got, ca.Namespace+"/"+ca.Name)
					}
					if len(cv.SHA256) != 64 {
						t.Errorf("port %d: digest %q", l.port, cv.SHA256)
					}
					if cv.Optional != (l.port == 8443 && tc.want.optional8443) {
						t.Errorf("port %d: optional %v", l.port, cv.Optional)
					}
				}
				if strings.Join(got, ",") != strings.Join(l.cas, ",") {
					t.Errorf("port %d: CAs %v, want %v", l.port, got, l.cas)
				}
			}
			if modelListener(res.LoadBalancers[0], 80).ClientValidation != nil {
				t.Error("the HTTP listener got client validation")
			}
			insecure := false
			for _, c := range st.Conditions {
				if c.Type == "InsecureFrontendValidationMode" {
					insecure = c.Status == metav1.ConditionTrue && c.Reason == "ConfigurationChanged"
				}
			}
			if insecure != tc.want.insecure {
				t.Errorf("InsecureFrontendValidationMode %v, want %v: %+v", insecure, tc.want.insecure, st.Conditions)
			}
		})
	}
}

// The bundle's digest is that of the ConfigMaps' canonical ca.crt joined
// in order, which the agent computes again: a changed ConfigMap changes
// it, so the agent never serves a bundle translation did not accept.
func TestGatewayFrontendValidationDigest(t *testing.T) {
	frontend := "      default: {validation: {caCertificateRefs: [{kind: ConfigMap, group: \"\", name: ca}, {kind: ConfigMap, group: \"\", name: ca2}]}}\n"
	snap := frontendSnap(t, frontend, "")
	cv := modelListener(Translate(snap, gatewayOpts()).LoadBalancers[0], 443).ClientValidation
	a, b := snap.ConfigMap("default", "ca"), snap.ConfigMap("default", "ca2")
	pa, _ := tlscert.ParseCA([]byte(a.Data["ca.crt"]))
	pb, _ := tlscert.ParseCA([]byte(b.Data["ca.crt"]))
	want, err := tlscert.JoinCA(pa.PEM, pb.PEM)
	if err != nil || cv == nil || cv.SHA256 != want.SHA256 {
		t.Fatalf("digest %+v, want %v (%v)", cv, want, err)
	}
	b.Data["ca.crt"] = caConfigMap(t, "default", "ca2").Data["ca.crt"]
	if again := modelListener(Translate(snap, gatewayOpts()).LoadBalancers[0], 443).ClientValidation; again.SHA256 == cv.SHA256 {
		t.Fatal("a changed ConfigMap kept the digest")
	}
}
