package gatewayapi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
)

// The CORS filter becomes the policy's model.CORS: origins canonical
// (lowercase, no default port), methods listed ("*" and none expanded),
// headers once each, the CRD's default max age.
func TestGatewayCORSFilter(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {value: /exact}}]
    filters:
    - type: CORS
      cors:
        allowOrigins: ["https://App.example:443", "http://a.example:8080", "http://b.example:80"]
        allowCredentials: true
        allowMethods: ["*"]
        allowHeaders: [X-Token, x-token, Content-Type]
        exposeHeaders: [X-Request-Id]
        maxAge: 600
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /any}}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"]}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /wild}}]
    filters: [{type: CORS, cors: {allowOrigins: ["https://*.Example.com:443", "http://*"]}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /cred}}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"], allowCredentials: true}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /echo}}]
    filters: [{type: CORS, cors: {allowOrigins: ["*"], allowMethods: ["*"], allowHeaders: ["*"], allowCredentials: true}}]
    backendRefs: [{name: svc, port: 80}]`)
	assertAccepted(t, res)
	opts := routeOptions(t, res, 80)
	for path, want := range map[string]*model.CORS{
		"STARTS_WITH /exact": {AllowOrigins: []string{"https://app.example", "http://a.example:8080", "http://b.example"},
			AllowMethods:      []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"},
			EchoRequestMethod: true,
			AllowHeaders:      []string{"X-Token", "Content-Type"},
			ExposeHeaders:     []string{"X-Request-Id"}, AllowCredentials: true, MaxAgeSeconds: 600, RefuseOtherPreflights: true},
		"STARTS_WITH /any": {AllowOrigins: []string{"*"}, AllowMethods: []string{"GET", "HEAD", "POST"}, MaxAgeSeconds: 5, RefuseOtherPreflights: true},
		"STARTS_WITH /wild": {AllowOrigins: []string{"https://*.example.com", "http://*"}, AllowMethods: []string{"GET", "HEAD", "POST"},
			MaxAgeSeconds: 5, RefuseOtherPreflights: true},
		"STARTS_WITH /cred": {AllowOrigins: []string{"http://*", "https://*"}, AllowMethods: []string{"GET", "HEAD", "POST"},
			AllowCredentials: true, MaxAgeSeconds: 5, RefuseOtherPreflights: true},
		"STARTS_WITH /echo": {AllowOrigins: []string{"http://*", "https://*"}, AllowMethods: allMethods,
			EchoRequestMethod: true, EchoRequestHeaders: true, AllowCredentials: true, MaxAgeSeconds: 5, RefuseOtherPreflights: true},
	} {
		o := opts[path]
		if o == nil || !reflect.DeepEqual(o.CORS, want) {
			t.Errorf("%s: %+v, want %+v (options %+v)", path, o, want, opts)
		}
	}
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{
		"'https://app.example' 'http://a.example:8080' 'http://b.example'",
		"http-response set-header Access-Control-Expose-Headers 'X-Request-Id' if ",
		" req.fhdr(origin) -m reg '^https://[a-z0-9.-]+\\.example\\.com$' '^http://[a-z0-9.-]+(:[0-9]{1,5})?$'\n",
	} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
}

// What render cannot answer as the spec says refuses only the route.
func TestGatewayCORSRefusals(t *testing.T) {
	const at = "spec.rules[0].filters[0].cors"
	for _, tc := range []struct{ name, cors, message string }{
		{"wildcard inside a label", `{allowOrigins: ["https://a*.example"]}`, "allowOrigins[0]: invalid origin pattern"},
		{"wildcard twice", `{allowOrigins: ["https://*.*.example"]}`, "allowOrigins[0]"},
		{"wildcard ;evil", `{allowOrigins: ["https://*.example;evil"]}`, "allowOrigins[0]"},
		{"star with others", `{allowOrigins: ["https://a.example", "*"]}`, "allowOrigins[1]"},
		{"no origin", `{allowMethods: [GET]}`, "allowOrigins"},
		{"origin with path", `{allowOrigins: ["https://a.example/x"]}`, "allowOrigins[0]"},
		{"origin ;evil", `{allowOrigins: ["https://a.example;evil"]}`, "allowOrigins[0]"},
		{"origin quote", `{allowOrigins: ["https://a.example'x"]}`, "allowOrigins[0]"},
		{"header star with others", `{allowOrigins: ["*"], allowHeaders: [X-A, "*"]}`, "allowHeaders: \"*\" alongside"},
		{"header ;evil", `{allowOrigins: ["*"], allowHeaders: ["X-A;evil"]}`, "allowHeaders[0]"},
		{"expose star", `{allowOrigins: ["*"], exposeHeaders: ["*"]}`, "exposeHeaders[0]"},
		{"expose space", `{allowOrigins: ["*"], exposeHeaders: ["X A"]}`, "exposeHeaders[0]"},
		{"method lowercase", `{allowOrigins: ["*"], allowMethods: [get]}`, "allowMethods[0]"},
		{"method star with others", `{allowOrigins: ["*"], allowMethods: [GET, "*"]}`, "allowMethods[1]"},
		{"max age", `{allowOrigins: ["*"], maxAge: 40000000}`, "maxAge"},
		{"no settings", ``, "without its settings"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			filter := `{type: CORS, cors: ` + tc.cors + `}`
			field := at
			if tc.cors == "" {
				filter, field = `{type: CORS}`, "spec.rules[0].filters[0]"
			}
			res := filterResult(t, "[{filters: ["+filter+"], backendRefs: [{name: svc, port: 80}]}]")
			c := findCondition(t, res.Gateway.Routes[routeRef("default", "r")][0].Conditions, string(gwv1.RouteConditionAccepted))
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) {
				t.Errorf("Accepted %s/%s", c.Status, c.Reason)
			}
			found := false
			for _, p := range res.Problems {
				if p.Name == "r" && p.Severity == model.SeverityError {
					found = p.Field == field && strings.Contains(p.Message, tc.message)
					if !found {
						t.Errorf("problem %s: %s, want %s: ...%s...", p.Field, p.Message, field, tc.message)
					}
				}
			}
			if !found {
				t.Errorf("no Error problem: %+v", res.Problems)
			}
			if got := gatewayRoute(t, res.LoadBalancers[0], 80, gwRequest{host: "victim.example", path: "/"}); got != "svc" {
				t.Errorf("victim: %s", got)
			}
		})
	}
}
