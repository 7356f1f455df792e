package gatewayapi

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// backendClientDoc is a Gateway that presents a client certificate to its
// backends (REF is its clientCertificateRef), a route to a Service under
// a BackendTLSPolicy and one to a plain Service.
const backendClientDoc = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  tls:
    backend:
      clientCertificateRef: REF
---
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /tls}}]
    backendRefs: [{name: tls, port: 443}]
  - matches: [{path: {type: Exact, value: /plain}}]
    backendRefs: [{name: plain, port: 443}]
---
kind: BackendTLSPolicy
metadata: {name: tls}
spec:
  targetRefs: [{group: "", kind: Service, name: tls}]
  validation: {hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]}
`

func TestBackendClientCertificate(t *testing.T) {
	caPEM, _, err := tlscert.SelfSigned([]string{"ca.example.com"}, time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := tlscert.SelfSigned([]string{"client.example.com"}, time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tlscert.Parse(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(ns, name string, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeTLS, Data: data}
	}
	good := map[string][]byte{corev1.TLSCertKey: crt, corev1.TLSPrivateKeyKey: key}
	for _, tc := range []struct {
		name, ref string
		// reason is the Gateway's ResolvedRefs reason; with
		// ResolvedRefs true, the pool presents the Secret wantSecret.
		reason, wantSecret, message string
	}{
		{name: "resolved", ref: "{name: client}", reason: gatewayReasonResolvedRefs, wantSecret: "default/client"},
		{name: "granted", ref: "{name: client, namespace: shared}", reason: gatewayReasonResolvedRefs, wantSecret: "shared/client"},
		{name: "not found", ref: "{name: nope}", reason: gatewayReasonInvalidClientCertificate, message: "not found"},
		{name: "kind", ref: "{kind: ConfigMap, name: client}", reason: gatewayReasonInvalidClientCertificate, message: "only core Secrets"},
		{name: "group", ref: "{group: example.com, kind: Secret, name: client}", reason: gatewayReasonInvalidClientCertificate, message: "only core Secrets"},
		{name: "malformed", ref: "{name: malformed}", reason: gatewayReasonInvalidClientCertificate, message: "secret default/malformed"},
		{name: "not permitted", ref: "{name: client, namespace: private}", reason: gatewayReasonRefNotPermitted, message: "no ReferenceGrant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := gatewaySnap(t, strings.Replace(backendClientDoc, "REF", tc.ref, 1)+`
---
kind: ReferenceGrant
metadata: {name: gateways, namespace: shared}
spec:
  from: [{group: gateway.networking.k8s.io, kind: Gateway, namespace: default}]
  to: [{group: "", kind: Secret}]
`)
			for _, name := range []string{"tls", "plain"} {
				svc, es := backend("default", name, "https", 443, 1)
				snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
			}
			snap.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"},
				Data: map[string]string{"ca.crt": string(caPEM)}}}
			snap.Secrets = []*corev1.Secret{secret("default", "client", good), secret("shared", "client", good),
				secret("private", "client", good), secret("default", "malformed", map[string][]byte{corev1.TLSCertKey: crt})}
			res := Translate(snap, gatewayOpts())
			if len(res.LoadBalancers) != 1 {
				t.Fatalf("%d load balancers, want the Gateway's", len(res.LoadBalancers))
			}
			lb := res.LoadBalancers[0]
			pools := poolsByPath(lb)
			st := res.Gateway.Gateways[model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}]
			rr := findCondition(t, st.Conditions, gatewayConditionResolvedRefs)
			if rr.Reason != tc.reason || (rr.Status == metav1.ConditionTrue) != (tc.wantSecret != "") || !strings.Contains(rr.Message, tc.message) {
				t.Errorf("ResolvedRefs %s %s %q, want reason %s and a message with %q", rr.Status, rr.Reason, rr.Message, tc.reason, tc.message)
			}
			if acc := findCondition(t, st.Conditions, string(gwv1.GatewayConditionAccepted)); acc.Status != metav1.ConditionTrue {
				t.Errorf("Accepted %s %s: a Gateway whose client certificate does not resolve is still served", acc.Status, acc.Reason)
			}
			u := pools["/tls"].UpstreamTLS
			if u == nil || !u.Verify || u.CAPEM == "" {
				t.Fatalf("/tls upstream TLS %+v, want the policy's", u)
			}
			if tc.wantSecret == "" {
				if u.Secret != "" || u.ClientSHA256 != "" {
					t.Errorf("/tls presents %s/%s (%s) for a ref that did not resolve", u.Namespace, u.Secret, u.ClientSHA256)
				}
				if len(res.Problems) == 0 || res.Problems[0].Field != backendClientCertificateField {
					t.Errorf("problems %+v, want one for %s", res.Problems, backendClientCertificateField)
				}
				return
			}
			if got := u.Namespace + "/" + u.Secret; got != tc.wantSecret || u.ClientSHA256 != pair.SHA256 {
				t.Errorf("/tls presents %s (%s), want %s (%s)", got, u.ClientSHA256, tc.wantSecret, pair.SHA256)
			}
			if p := pools["/plain"]; p.UpstreamTLS != nil {
				t.Errorf("/plain upstream TLS %+v: a pool without a policy presents nothing", p.UpstreamTLS)
			}
		})
	}
}

// poolsByPath is the pool of each path rule of lb's first listener.
func poolsByPath(lb *model.LoadBalancer) map[string]*model.Pool {
	pools := map[string]*model.Pool{}
	for _, p := range lb.Listeners[0].Policies {
		for _, r := range p.Rules {
			if r.Type == model.RulePath {
				pools[r.Value] = lb.Pool(p.PoolID)
			}
		}
	}
	return pools
}
