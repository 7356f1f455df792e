package gatewayapi

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// routePools returns the pool of route r's policies on port 80, by path.
func routePools(t *testing.T, res *translate.Result) map[string]*model.Pool {
	t.Helper()
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("load balancers %d: %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	pools := map[string]*model.Pool{}
	for i := range lb.Pools {
		pools[lb.Pools[i].ID] = &lb.Pools[i]
	}
	out := map[string]*model.Pool{}
	for _, l := range lb.Listeners {
		if l.Port != 80 {
			continue
		}
		for _, p := range l.Policies {
			if p.Source.Name != "r" {
				continue
			}
			for _, r := range p.Rules {
				if r.Type == model.RulePath {
					out[r.Value] = pools[p.PoolID]
				}
			}
		}
	}
	return out
}

// Each rule's timeouts, retry and sessionPersistence become its pool's
// settings, under a pool of its own: the victim route (and any Ingress)
// keeps the Service's plain pool. A request timeout with retry is also a
// deadline over all attempts; without retry, or 0s, it is not.
func TestGatewayRuleSettings(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /req}}]
    timeouts: {request: 1m30s}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /both}}]
    timeouts: {request: 10s, backendRequest: 3s}
    retry: {attempts: 5, codes: [503, 500, 503]}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /zero}}]
    timeouts: {request: 0s}
    retry: {attempts: 0, backoff: 0s}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /codes}}]
    retry: {codes: [502]}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /many}}]
    retry: {attempts: 100}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /cookie}}]
    sessionPersistence: {sessionName: app-session}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /session}}]
    sessionPersistence: {idleTimeout: 10m, absoluteTimeout: 1500ms, cookieConfig: {lifetimeType: Session}}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /permanent}}]
    sessionPersistence: {absoluteTimeout: 1h, cookieConfig: {lifetimeType: Permanent}}
    backendRefs: [{name: svc, port: 80}]`)
	assertAccepted(t, res)
	pools := routePools(t, res)
	plain := pools["/plain"]
	if plain == nil || plain.ServerTimeout != 0 || plain.Tries != 0 || plain.Affinity != nil || plain.Name != "default_svc_80" {
		t.Fatalf("plain pool: %+v", plain)
	}
	type want struct {
		server        time.Duration
		tries         int
		statuses      []int
		retryTimeout  bool
		deadline      time.Duration
		cookie        string
		maxAgeSeconds int
		maxLife       int
		maxIdle       int
	}
	for path, w := range map[string]want{
		"/req":       {server: 90 * time.Second},
		"/both":      {server: 3 * time.Second, tries: 3, statuses: []int{500, 503}, retryTimeout: true, deadline: 10 * time.Second}, // 10s holds 3 attempts of 3s
		"/zero":      {server: 24 * time.Hour, tries: 1},
		"/codes":     {statuses: []int{502}},
		"/many":      {tries: 11}, // attempts 100: pier's bound, 10 retries
		"/cookie":    {cookie: "app-session"},
		"/permanent": {maxAgeSeconds: 3600},
		"/session":   {maxLife: 2, maxIdle: 600}, // 1500ms rounded up
	} {
		p := pools[path]
		if p == nil {
			t.Errorf("%s: no pool", path)
			continue
		}
		if p.ID == plain.ID || !strings.HasPrefix(p.Name, "default_rule_") || len(p.Members) != len(plain.Members) {
			t.Errorf("%s: pool %s %s shares or lacks the Service's members", path, p.ID, p.Name)
		}
		connect := time.Duration(0)
		if w.server < 5*time.Second {
			connect = w.server
		}
		if p.ServerTimeout != w.server || p.ConnectTimeout != connect || p.Tries != w.tries || !reflect.DeepEqual(p.RetryStatuses, w.statuses) || p.RetryTimeout != w.retryTimeout ||
			p.Deadline != w.deadline {
			t.Errorf("%s: server %v tries %d statuses %v timeout %v deadline %v, want %+v", path, p.ServerTimeout, p.Tries, p.RetryStatuses, p.RetryTimeout, p.Deadline, w)
		}
		switch {
		case w.cookie == "" && w.maxAgeSeconds == 0 && w.maxLife == 0:
			if p.Affinity != nil {
				t.Errorf("%s: affinity %+v", path, p.Affinity)
			}
		case p.Affinity == nil:
			t.Errorf("%s: no affinity", path)
		case w.cookie != "" && p.Affinity.Name != w.cookie, p.Affinity.MaxAgeSeconds != w.maxAgeSeconds,
			p.Affinity.MaxLifeSeconds != w.maxLife, p.Affinity.MaxIdleSeconds != w.maxIdle:
			t.Errorf("%s: affinity %+v", path, p.Affinity)
		case w.cookie == "" && !strings.HasPrefix(p.Affinity.Name, "pier_"):
			t.Errorf("%s: default cookie %s", path, p.Affinity.Name)
		}
	}
	if got := gatewayRoute(t, res.LoadBalancers[0], 80, gwRequest{host: "victim.example", path: "/"}); got != "svc" {
		t.Errorf("victim: %s", got)
	}
	for _, p := range res.LoadBalancers[0].Listeners[0].Policies {
		if p.Source.Name == "victim" && p.PoolID != plain.ID {
			t.Errorf("victim pool %s, want the plain %s", p.PoolID, plain.ID)
		}
	}
}

// A value pier cannot honour refuses only its route, naming the field.
func TestGatewayRuleSettingsRefusals(t *testing.T) {
	const rule0 = "spec.rules[0]"
	for _, tc := range []struct {
		name, rule, field, message string
	}{
		{"request fraction", `timeouts: {request: 1.5s}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request microseconds", `timeouts: {request: 10us}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request negative", `timeouts: {request: -1s}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request ;evil", `timeouts: {request: "10s;evil"}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request space", `timeouts: {request: "10s "}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request empty", `timeouts: {request: ""}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request six digits", `timeouts: {request: 100000s}`, rule0 + ".timeouts.request", "not a Gateway API duration"},
		{"request 25h", `timeouts: {request: 25h}`, rule0 + ".timeouts.request", "24h"},
		{"backend over request", `timeouts: {request: 1s, backendRequest: 2s}`, rule0 + ".timeouts.backendRequest", "longer than request"},
		{"backend bad", `timeouts: {backendRequest: 2d}`, rule0 + ".timeouts.backendRequest", "not a Gateway API duration"},
		{"attempts -1", `retry: {attempts: -1}`, rule0 + ".retry.attempts", "negative"},
		{"backoff", `retry: {backoff: 100ms}`, rule0 + ".retry.backoff", "between retries"},
		{"backoff bad", `retry: {backoff: 1x}`, rule0 + ".retry.backoff", "not a Gateway API duration"},
		{"code 505", `retry: {codes: [502, 505]}`, rule0 + ".retry.codes[1]", "not 505"},
		{"code 429", `retry: {codes: [429]}`, rule0 + ".retry.codes[0]", "not 429"},
		{"header persistence", `sessionPersistence: {type: Header}`, rule0 + ".sessionPersistence.type", "only Cookie"},
		{"cookie ;evil", `sessionPersistence: {sessionName: "s;evil"}`, rule0 + ".sessionPersistence.sessionName", "cookie name"},
		{"cookie space", `sessionPersistence: {sessionName: "a b"}`, rule0 + ".sessionPersistence.sessionName", "cookie name"},
		{"idle 0s", `sessionPersistence: {idleTimeout: 0s}`, rule0 + ".sessionPersistence.idleTimeout", "outside"},
		{"idle fraction", `sessionPersistence: {idleTimeout: 0.5s}`, rule0 + ".sessionPersistence.idleTimeout", "not a Gateway API duration"},
		{"idle 11 years", `sessionPersistence: {idleTimeout: 99999h}`, rule0 + ".sessionPersistence.idleTimeout", "outside"},
		{"lifetime bogus", `sessionPersistence: {cookieConfig: {lifetimeType: Forever}}`, rule0 + ".sessionPersistence.cookieConfig.lifetimeType", "Session or Permanent"},
		{"permanent without", `sessionPersistence: {cookieConfig: {lifetimeType: Permanent}}`, rule0 + ".sessionPersistence.absoluteTimeout", "needs"},
		{"permanent 0s", `sessionPersistence: {absoluteTimeout: 0s, cookieConfig: {lifetimeType: Permanent}}`, rule0 + ".sessionPersistence.absoluteTimeout", "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := filterResult(t, "[{"+tc.rule+", backendRefs: [{name: svc, port: 80}]}]")
			c := findCondition(t, res.Gateway.Routes[routeRef("default", "r")][0].Conditions, string(gwv1.RouteConditionAccepted))
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) || !strings.HasPrefix(c.Message, tc.field+": ") {
				t.Errorf("Accepted %s/%s %q", c.Status, c.Reason, c.Message)
			}
			found := false
			for _, p := range res.Problems {
				if p.Name == "r" && p.Severity == model.SeverityError {
					found = p.Field == tc.field && strings.Contains(p.Message, tc.message)
					if !found {
						t.Errorf("problem %s: %s, want %s: ...%s...", p.Field, p.Message, tc.field, tc.message)
					}
				}
			}
			if !found {
				t.Errorf("no Error problem on %s: %+v", tc.field, res.Problems)
			}
			lb := res.LoadBalancers[0]
			if got := gatewayRoute(t, lb, 80, gwRequest{host: "victim.example", path: "/"}); got != "svc" {
				t.Errorf("victim: %s", got)
			}
			for _, l := range lb.Listeners {
				for _, p := range l.Policies {
					if p.Source.Name == "r" {
						t.Errorf("policy %d from the refused route", p.Position)
					}
				}
			}
		})
	}
}

// The rule's pool renders (render validates it again) into its own
// backend with the timeout, retries, retry-on and cookie lines.
func TestGatewayRuleSettingsRender(t *testing.T) {
	res := filterResult(t, `
  - timeouts: {request: 10s, backendRequest: 3s}
    retry: {attempts: 2, codes: [503, 502]}
    sessionPersistence: {sessionName: app-session}
    backendRefs: [{name: svc, port: 80}]`)
	assertAccepted(t, res)
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{
		"    timeout connect 3s\n    timeout server 3s\n    retries 2\n    retry-on conn-failure empty-response response-timeout 502 503\n",
		"    cookie 'app-session' insert indirect nocache",
	} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no line %q in\n%s", want, r.Fragment)
		}
	}
}
