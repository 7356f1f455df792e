package gatewayapi

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/internal/translate"
)

// mixedGatewayDoc: on 8443, a TLS listener in tls.mode Terminate for
// t.example, one in Passthrough for p.example and an HTTPS one for
// shop.example (the spec's mixed termination, and HTTPS beside it); on
// 9443 a Terminate listener without hostname, and on 9444 one whose
// certificate Secret does not exist.
const mixedGatewayDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: terminate, port: 8443, protocol: TLS, hostname: t.example, tls: {mode: Terminate, certificateRefs: [{name: t-tls}]}}
  - {name: passthrough, port: 8443, protocol: TLS, hostname: p.example, tls: {mode: Passthrough}}
  - {name: shop, port: 8443, protocol: HTTPS, hostname: shop.example, tls: {certificateRefs: [{name: shop-tls}]}}
  - {name: any, port: 9443, protocol: TLS, tls: {mode: Terminate, certificateRefs: [{name: t-tls}]}}
  - {name: nocert, port: 9444, protocol: TLS, tls: {mode: Terminate, certificateRefs: [{name: missing}]}}
` + `
---
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw, sectionName: shop}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`

func mixedSnap(t *testing.T) *translate.Result {
	t.Helper()
	docs := mixedGatewayDoc +
		tlsRouteDoc("default", "term", "{name: gw, sectionName: terminate}", "t.example", "{name: plain, port: 80}") +
		tlsRouteDoc("default", "pass", "{name: gw, sectionName: passthrough}", "p.example", "{name: secure, port: 80}") +
		tlsRouteDoc("default", "catchall", "{name: gw, sectionName: any}", "", "{name: plain, port: 80}")
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "plain", "secure", "web")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "t-tls", "t.example"), tlsSecretFor(t, "default", "shop-tls", "shop.example"))
	return Translate(snap, gatewayOpts())
}

// TestTLSTerminate: a TLS listener in tls.mode Terminate is Accepted and
// takes TLSRoutes; its routes' hosts are decrypted (with its certificate,
// apart from the HTTPS listener's) and passed to their TCP pools, beside
// a Passthrough listener and an HTTPS one on the same port; one without
// hostname decrypts every SNI of its port; one whose certificate does
// not resolve is not served (InvalidCertificateRef).
func TestTLSTerminate(t *testing.T) {
	res := mixedSnap(t)
	want := map[string][2]string{
		"terminate": {"Accepted", "ResolvedRefs"}, "passthrough": {"Accepted", "ResolvedRefs"}, "shop": {"Accepted", "ResolvedRefs"},
		"any": {"Accepted", "ResolvedRefs"}, "nocert": {"Accepted", "InvalidCertificateRef"},
	}
	for _, l := range res.Gateway.Gateways[gatewayRef("default", "gw")].Listeners {
		acc := findCondition(t, l.Conditions, string(gwv1.ListenerConditionAccepted))
		refs := findCondition(t, l.Conditions, string(gwv1.ListenerConditionResolvedRefs))
		if w := want[string(l.Name)]; acc.Reason != w[0] || refs.Reason != w[1] {
			t.Errorf("listener %s: Accepted %s ResolvedRefs %s, want %v", l.Name, acc.Reason, refs.Reason, w)
		}
		wantKind, wantAttached := model.KindTLSRoute, int32(1)
		if l.Name == "shop" {
			wantKind = model.KindHTTPRoute
		}
		if l.Name == "nocert" {
			wantAttached = 0
		}
		if len(l.SupportedKinds) == 0 || string(l.SupportedKinds[0].Kind) != wantKind || l.AttachedRoutes != wantAttached {
			t.Errorf("listener %s: kinds %+v, attachedRoutes %d", l.Name, l.SupportedKinds, l.AttachedRoutes)
		}
	}
	for _, name := range []string{"term", "pass", "catchall"} {
		if acc, _ := tcpParent(t, res, tlsRef("default", name)); acc.Reason != "Accepted" {
			t.Errorf("%s: %+v", name, acc)
		}
	}
	lb := res.LoadBalancers[0]
	if len(lb.Listeners) != 2 {
		t.Fatalf("listeners %+v, want 8443 and 9443", lb.Listeners)
	}
	l := listenerOn(lb, 8443)
	wantRoutes := "t.example>decrypt:default_plain_80_tcp p.example>default_secure_80_tcp"
	if got := strings.Join(passthroughOf(lb, l), " "); got != wantRoutes {
		t.Errorf("8443 SNI routes %q, want %q", got, wantRoutes)
	}
	if len(l.Certificates) != 1 || l.Certificates[0].Secret != "shop-tls" || len(l.DecryptCertificates) != 1 ||
		l.DecryptCertificates[0].Secret != "t-tls" || strings.Join(l.DecryptCertificates[0].Hosts, ",") != "t.example" {
		t.Errorf("8443 certificates %+v, decrypt certificates %+v", l.Certificates, l.DecryptCertificates)
	}
	if len(l.ListenerHosts) != 0 {
		t.Errorf("8443 listener hosts %q: only HTTPS listeners tell misdirected requests apart", l.ListenerHosts)
	}
	if got := strings.Join(passthroughOf(lb, listenerOn(lb, 9443)), " "); got != ">decrypt:default_plain_80_tcp" {
		t.Errorf("9443 SNI routes %q", got)
	}
}

// The mixed port renders: the SNI frontend hands t.example to the
// decrypting frontend and shop.example's (the default) to the HTTPS one;
// the decrypting frontend binds its own socket with t.example's
// certificate first and chooses the pool by the decrypted SNI; the
// crt-list serves the HTTPS certificate first.
func TestTLSTerminateRender(t *testing.T) {
	lb := mixedSnap(t).LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	at := layout.LB{UUID: lb.UUID, Dir: dir}
	tcert, _ := at.Cert(listenerOn(lb, 8443).DecryptCertificates[0].ID, listenerOn(lb, 8443).DecryptCertificates[0].SHA256)
	for _, want := range []string{"_8443_tls from pier_tcp\n", "-8443-tls accept-proxy ssl crt " + tcert + " crt-list ",
		"use_backend %[ssl_fc_sni,lower,map(", "server tls abns@pier-" + lb.UUID + "-8443-tls send-proxy-v2\n",
		"default_backend pier_tls_", "_9443_tls from pier_tcp\n"} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
	var maps []string
	for _, m := range r.Maps {
		maps = append(maps, string(m.Data))
	}
	joined := "\n" + strings.Join(maps, "\n")
	for _, want := range []string{"\nt.example pier_tlsd_", "\nt.example be_", "\np.example be_"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q in the maps %q", want, joined)
		}
	}
	if lines := strings.Split(string(r.CrtList), "\n"); !strings.Contains(lines[0], "shop.example") {
		t.Errorf("crt-list %q: the HTTPS certificate is not first", r.CrtList)
	}
}

// TestTLSTerminateBackendTLS: one Service under a BackendTLSPolicy behind
// a terminating TLS listener and a passthrough one. The decrypted stream
// is encrypted again towards it (its TCP pool speaks verified TLS, and
// the policy's status names the Gateway); the passthrough connections
// reach it as the client sent them, with no TLS of pier's around the
// client's own.
func TestTLSTerminateBackendTLS(t *testing.T) {
	docs := mixedGatewayDoc +
		tlsRouteDoc("default", "term", "{name: gw, sectionName: terminate}", "t.example", "{name: secure, port: 80}") +
		tlsRouteDoc("default", "pass", "{name: gw, sectionName: passthrough}", "p.example", "{name: secure, port: 80}") + `
---
kind: BackendTLSPolicy
metadata: {name: secure}
spec:
  targetRefs: [{group: "", kind: Service, name: secure}]
  validation: {hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]}
`
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "secure", "web")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "t-tls", "t.example"), tlsSecretFor(t, "default", "shop-tls", "shop.example"))
	caPEM, _, err := tlscert.SelfSigned([]string{"ca.example.com"}, time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	snap.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"},
		Data: map[string]string{"ca.crt": string(caPEM)}}}
	res := Translate(snap, gatewayOpts())
	lb := res.LoadBalancers[0]
	l := listenerOn(lb, 8443)
	byHost := map[string]*model.Pool{}
	decrypt := map[string]bool{}
	for _, r := range l.Passthrough {
		byHost[r.Host], decrypt[r.Host] = lb.Pool(r.PoolID), r.Decrypt
	}
	term, pass := byHost["t.example"], byHost["p.example"]
	if term == nil || !decrypt["t.example"] || !term.TCP || term.Protocol != model.BackendHTTPS || term.UpstreamTLS == nil ||
		term.UpstreamTLS.Name != "abc.example.com" || len(term.Members) != 1 {
		t.Errorf("terminated route's pool %+v, want TCP with verified TLS to abc.example.com", term)
	}
	if pass == nil || decrypt["p.example"] || !pass.TCP || pass.Protocol != "" || pass.UpstreamTLS != nil || len(pass.Members) != 1 {
		t.Errorf("passthrough route's pool %+v, want plain TCP", pass)
	}
	ancestors := res.Gateway.Policies[model.ObjectRef{Kind: model.KindBackendTLSPolicy, Namespace: "default", Name: "secure"}]
	if len(ancestors) != 1 || ancestors[0].AncestorRef.Name != "gw" {
		t.Fatalf("policy ancestors %+v, want the Gateway gw", ancestors)
	}
	if acc := findCondition(t, ancestors[0].Conditions, string(gwv1.PolicyConditionAccepted)); acc.Status != metav1.ConditionTrue {
		t.Errorf("policy Accepted %+v", acc)
	}
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render refused the terminated route's TLS pool: %v", err)
	}
	if !bytes.Contains(r.Fragment, []byte("ssl verify required ca-file")) {
		t.Errorf("no verified TLS on the terminated route's servers:\n%s", r.Fragment)
	}
}
