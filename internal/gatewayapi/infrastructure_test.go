package gatewayapi

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/translate"
)

func infraDocs(infrastructure string) string {
	return gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  infrastructure: ` + infrastructure + `
  listeners:
  - {name: http, port: 8080, protocol: HTTP}
  - {name: other, port: 80, protocol: HTTP, hostname: a.example}
  - {name: same-port, port: 80, protocol: HTTP, hostname: b.example}
---
kind: Gateway
metadata: {name: bystander}
spec:
  gatewayClassName: pier
  listeners: [{name: http, port: 80, protocol: HTTP}]
`
}

// spec.infrastructure: valid labels and annotations reach the Gateway's
// published Service (translate.GatewayInfrastructure) with its listener
// ports; a parametersRef or a key or value the API server would refuse
// on a Service refuses the Gateway (InvalidParameters, the field named),
// and the other Gateway is served.
func TestGatewayInfrastructure(t *testing.T) {
	res := Translate(gatewaySnap(t, infraDocs(`{labels: {key2: value2, example.com/team: a}, annotations: {key1: value1, note: "any text: ok"}}`)), gatewayOpts())
	got := res.Gateway.Infrastructure[gatewayRef("default", "gw")]
	want := translate.GatewayInfrastructure{
		Labels:      map[string]string{"key2": "value2", "example.com/team": "a"},
		Annotations: map[string]string{"key1": "value1", "note": "any text: ok"},
		Ports:       []translate.GatewayPort{{Port: 80, Protocol: "TCP"}, {Port: 8080, Protocol: "TCP"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("infrastructure %+v, want %+v", got, want)
	}
	if b := res.Gateway.Infrastructure[gatewayRef("default", "bystander")]; b.Labels != nil || len(b.Ports) != 1 {
		t.Errorf("bystander %+v", b)
	}

	for _, tc := range []struct{ name, infra, field string }{
		{"parametersRef", `{parametersRef: {group: invalid.io, kind: InvalidParameters, name: invalid}}`, "spec.infrastructure.parametersRef"},
		{"label value space", `{labels: {a: "b c"}}`, `spec.infrastructure.labels["a"]`},
		{"label value too long", `{labels: {a: "` + strings.Repeat("x", 64) + `"}}`, `spec.infrastructure.labels["a"]`},
		{"label key ;evil", `{labels: {"a;evil": b}}`, `spec.infrastructure.labels["a;evil"]`},
		{"label key pier's own", `{labels: {"pier.dev/x": b}}`, `spec.infrastructure.labels["pier.dev/x"]`},
		{"label gateway-name", `{labels: {"gateway.networking.k8s.io/gateway-name": other}}`, `spec.infrastructure.labels["gateway.networking.k8s.io/gateway-name"]`},
		{"label managed-by", `{labels: {"app.kubernetes.io/managed-by": me}}`, `spec.infrastructure.labels["app.kubernetes.io/managed-by"]`},
		{"label proxy name", `{labels: {"service.kubernetes.io/service-proxy-name": none}}`, `spec.infrastructure.labels["service.kubernetes.io/service-proxy-name"]`},
		{"annotation key slash", `{annotations: {"a/b/c": x}}`, `spec.infrastructure.annotations["a/b/c"]`},
		{"annotation value CRLF", `{annotations: {a: "x\r\ny"}}`, `spec.infrastructure.annotations["a"]`},
		{"nine labels", `{labels: {a: "1", b: "1", c: "1", d: "1", e: "1", f: "1", g: "1", h: "1", i: "1"}}`, "spec.infrastructure.labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := Translate(gatewaySnap(t, infraDocs(tc.infra)), gatewayOpts())
			st := res.Gateway.Gateways[gatewayRef("default", "gw")]
			c := findCondition(t, st.Conditions, string(gwv1.GatewayConditionAccepted))
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.GatewayReasonInvalidParameters) || !strings.HasPrefix(c.Message, tc.field) {
				t.Errorf("Accepted %s/%s %q, want False/InvalidParameters on %s", c.Status, c.Reason, c.Message, tc.field)
			}
			if _, ok := res.Gateway.Infrastructure[gatewayRef("default", "gw")]; ok || res.Accepted[gatewayRef("default", "gw")] != "" {
				t.Error("the refused Gateway has a load balancer or a Service to publish")
			}
			if !hasProblem(res, "gw", string(gwv1.GatewayReasonInvalidParameters)) {
				t.Errorf("no problem: %+v", res.Problems)
			}
			if res.Accepted[gatewayRef("default", "bystander")] == "" {
				t.Error("the other Gateway is not served")
			}
		})
	}
}
