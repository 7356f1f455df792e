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

// backendTLSDoc routes one path per Service (port 443 named btls) and
// gives them policies: valid, conflicting, pointing at a missing or bad
// ConfigMap, of another kind, with SANs HAProxy cannot check.
const backendTLSDoc = grpcGatewayDoc + `
---
kind: HTTPRoute
metadata: {name: web}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {type: Exact, value: /ok}}]
    backendRefs: [{name: ok, port: 443}]
  - matches: [{path: {type: Exact, value: /missing}}]
    backendRefs: [{name: missing, port: 443}]
  - matches: [{path: {type: Exact, value: /badkind}}]
    backendRefs: [{name: badkind, port: 443}]
  - matches: [{path: {type: Exact, value: /sans}}]
    backendRefs: [{name: sans, port: 443}]
  - matches: [{path: {type: Exact, value: /plain}}]
    backendRefs: [{name: plain, port: 443}]
---
kind: BackendTLSPolicy
metadata: {name: ok-first}
spec:
  targetRefs: [{group: "", kind: Service, name: ok}]
  validation: {hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]}
---
kind: BackendTLSPolicy
metadata: {name: ok-second}
spec:
  targetRefs: [{group: "", kind: Service, name: ok}]
  validation: {hostname: other.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]}
---
kind: BackendTLSPolicy
metadata: {name: missing}
spec:
  targetRefs: [{group: "", kind: Service, name: missing, sectionName: btls}]
  validation: {hostname: abc.example.com, caCertificateRefs: [{group: "", kind: ConfigMap, name: nope}]}
---
kind: BackendTLSPolicy
metadata: {name: badkind}
spec:
  targetRefs: [{group: "", kind: Service, name: badkind}]
  validation: {hostname: abc.example.com, caCertificateRefs: [{group: "", kind: Secret, name: ca}]}
---
kind: BackendTLSPolicy
metadata: {name: sans}
spec:
  targetRefs: [{group: "", kind: Service, name: sans}]
  validation:
    hostname: abc.example.com
    caCertificateRefs: [{group: "", kind: ConfigMap, name: ca}]
    subjectAltNames: [{type: URI, uri: "spiffe://abc.example.com/x"}]
`

func TestBackendTLSPolicy(t *testing.T) {
	snap := gatewaySnap(t, backendTLSDoc)
	for _, name := range []string{"ok", "missing", "badkind", "sans", "plain"} {
		svc, es := backend("default", name, "btls", 443, 1)
		snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	}
	caPEM, _, err := tlscert.SelfSigned([]string{"ca.example.com"}, time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	snap.ConfigMaps = []*corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ca"},
		Data: map[string]string{"ca.crt": string(caPEM)}}}
	ca, err := tlscert.ParseCA(caPEM)
	if err != nil {
		t.Fatal(err)
	}
	res := Translate(snap, gatewayOpts())
	lb := res.LoadBalancers[0]
	pools := poolsByPath(lb)
	ok := pools["/ok"]
	if ok == nil || ok.Protocol != model.BackendHTTPS || ok.UpstreamTLS == nil {
		t.Fatalf("/ok pool %+v, want HTTPS with UpstreamTLS", ok)
	}
	if u := ok.UpstreamTLS; !u.Verify || !u.SNI || u.Name != "abc.example.com" || u.CASHA256 != ca.SHA256 || u.CAPEM != string(ca.PEM) {
		t.Errorf("/ok upstream TLS %+v, want the older policy's hostname and the ConfigMap's CA", u)
	}
	if len(ok.Members) != 1 {
		t.Errorf("/ok members %v, want the Service's one", ok.Members)
	}
	for _, path := range []string{"/missing", "/badkind", "/sans"} {
		if p := pools[path]; p == nil || len(p.Members) != 0 || p.UpstreamTLS != nil {
			t.Errorf("%s pool %+v, want one without members (a policy not applied answers 503)", path, p)
		}
	}
	if p := pools["/plain"]; p == nil || p.UpstreamTLS != nil || p.Protocol != "" || len(p.Members) != 1 {
		t.Errorf("/plain pool %+v, want the Service's plain pool", p)
	}
	want := map[string][2]string{ // policy: Accepted reason, ResolvedRefs reason
		"ok-first":  {string(gwv1.PolicyReasonAccepted), string(gwv1.BackendTLSPolicyReasonResolvedRefs)},
		"ok-second": {string(gwv1.PolicyReasonConflicted), string(gwv1.BackendTLSPolicyReasonResolvedRefs)},
		"missing":   {string(gwv1.BackendTLSPolicyReasonNoValidCACertificate), string(gwv1.BackendTLSPolicyReasonInvalidCACertificateRef)},
		"badkind":   {string(gwv1.BackendTLSPolicyReasonNoValidCACertificate), string(gwv1.BackendTLSPolicyReasonInvalidKind)},
		"sans":      {string(gwv1.PolicyReasonInvalid), string(gwv1.BackendTLSPolicyReasonResolvedRefs)},
	}
	for name, reasons := range want {
		ancestors := res.Gateway.Policies[model.ObjectRef{Kind: model.KindBackendTLSPolicy, Namespace: "default", Name: name}]
		if len(ancestors) != 1 || ancestors[0].AncestorRef.Name != "gw" || ancestors[0].ControllerName != "pier.dev/gateway-controller" {
			t.Errorf("%s: ancestors %+v, want the Gateway gw of ours", name, ancestors)
			continue
		}
		acc := findCondition(t, ancestors[0].Conditions, string(gwv1.PolicyConditionAccepted))
		rr := findCondition(t, ancestors[0].Conditions, string(gwv1.BackendTLSPolicyConditionResolvedRefs))
		if acc.Reason != reasons[0] || rr.Reason != reasons[1] {
			t.Errorf("%s: Accepted %s, ResolvedRefs %s, want %s and %s", name, acc.Reason, rr.Reason, reasons[0], reasons[1])
		}
		if (acc.Status == metav1.ConditionTrue) != (reasons[0] == string(gwv1.PolicyReasonAccepted)) {
			t.Errorf("%s: Accepted %s", name, acc.Status)
		}
		if name == "sans" && !strings.Contains(acc.Message, "cannot be checked") {
			t.Errorf("sans: message %q does not say why", acc.Message)
		}
	}
}
