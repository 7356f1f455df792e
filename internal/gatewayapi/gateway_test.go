package gatewayapi

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

const precedenceDocs = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
---
kind: HTTPRoute
metadata: {name: r1}
spec:
  parentRefs: [{name: gw}]
  hostnames: [foo.com]
  rules:
  - backendRefs: [{name: prefix-root, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs: [{name: api, port: 80}]
  - matches: [{path: {type: Exact, value: /api}}]
    backendRefs: [{name: api-exact, port: 80}]
  - matches: [{path: {value: /api}, method: POST}]
    backendRefs: [{name: api-post, port: 80}]
  - matches: [{path: {value: /api}, headers: [{name: X-A, value: "1"}]}]
    backendRefs: [{name: api-h1, port: 80}]
  - matches: [{path: {value: /api}, headers: [{name: x-a, value: "1"}, {name: x-b, value: "2"}]}]
    backendRefs: [{name: api-h2, port: 80}]
  - matches: [{path: {value: /api}, queryParams: [{name: q, value: "1"}]}]
    backendRefs: [{name: api-q, port: 80}]
  - matches: [{path: {value: /dup}}]
    backendRefs: [{name: dup-first, port: 80}]
  - matches: [{path: {value: /dup}}]
    backendRefs: [{name: dup-second, port: 80}]
---
kind: HTTPRoute
metadata: {name: r2}
spec:
  parentRefs: [{name: gw}]
  hostnames: [foo.com]
  rules:
  - matches: [{path: {value: /api}}, {path: {value: /api/v2}}]
    backendRefs: [{name: newer, port: 80}]
---
kind: HTTPRoute
metadata: {name: r0-wild}
spec:
  parentRefs: [{name: gw}]
  hostnames: ["*.foo.com"]
  rules:
  - backendRefs: [{name: wild, port: 80}]
---
kind: HTTPRoute
metadata: {name: any}
spec:
  parentRefs: [{name: gw}]
  rules:
  - matches: [{path: {value: /api}}]
    backendRefs: [{name: anyhost, port: 80}]
`

func TestGatewayPrecedence(t *testing.T) {
	snap := gatewaySnap(t, precedenceDocs)
	withServices(snap, "default", "prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
		"dup-first", "dup-second", "newer", "wild", "anyhost")
	res := Translate(snap, gatewayOpts())
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("load balancers: %d, problems %+v", len(res.LoadBalancers), res.Problems)
	}
	lb := res.LoadBalancers[0]
	h := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		name string
		req  gwRequest
		want string
	}{
		{"prefix", gwRequest{host: "foo.com", path: "/api/x", method: "GET"}, "api"},
		{"exact before method", gwRequest{host: "foo.com", path: "/api", method: "POST"}, "api-exact"},
		{"method before headers", gwRequest{host: "foo.com", path: "/api/x", method: "POST", headers: h("x-a", "1", "x-b", "2")}, "api-post"},
		{"more headers first", gwRequest{host: "foo.com", path: "/api/x", method: "GET", headers: h("x-a", "1", "x-b", "2")}, "api-h2"},
		{"one header", gwRequest{host: "foo.com", path: "/api/x", method: "GET", headers: h("x-a", "1")}, "api-h1"},
		{"headers before query", gwRequest{host: "foo.com", path: "/api/x", method: "GET", headers: h("x-a", "1"), query: h("q", "1")}, "api-h1"},
		{"query", gwRequest{host: "foo.com", path: "/api/x", method: "GET", query: h("q", "1")}, "api-q"},
		{"longer prefix of a newer route", gwRequest{host: "foo.com", path: "/api/v2/x", method: "GET"}, "newer"},
		{"element-wise prefix", gwRequest{host: "foo.com", path: "/apix", method: "GET"}, "prefix-root"},
		{"rule order breaks a tie", gwRequest{host: "foo.com", path: "/dup", method: "GET"}, "dup-first"},
		{"wildcard host before any host", gwRequest{host: "a.foo.com", path: "/api", method: "GET"}, "wild"},
		{"wildcard spans labels", gwRequest{host: "a.b.foo.com", path: "/", method: "GET"}, "wild"},
		{"any host", gwRequest{host: "bar.com", path: "/api", method: "GET"}, "anyhost"},
		{"nothing", gwRequest{host: "bar.com", path: "/", method: "GET"}, "404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := gatewayRoute(t, lb, 80, tc.req); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// The older route keeps an identical match: r2's /api on foo.com
	// is shadowed by r1's and must not become a policy of its own.
	for _, p := range lb.Listeners[0].Policies {
		if lb.Pool(p.PoolID).Service == "newer" && p.Rules[1].Value == "/api" {
			t.Errorf("the newer route's duplicate /api became policy %d", p.Position)
		}
	}
}

func TestIntersectHosts(t *testing.T) {
	for _, tc := range []struct {
		listener string
		route    []string
		want     []string
	}{
		{"", nil, []string{""}},
		{"", []string{"b.com", "*.a.com"}, []string{"*.a.com", "b.com"}},
		{"foo.com", nil, []string{"foo.com"}},
		{"foo.com", []string{"foo.com", "bar.com"}, []string{"foo.com"}},
		{"foo.com", []string{"*.com"}, []string{"foo.com"}},
		{"foo.com", []string{"*.foo.com"}, nil},
		{"*.foo.com", []string{"a.foo.com", "foo.com", "*.foo.com", "*.a.foo.com", "*.com", "b.bar.com"},
			[]string{"*.a.foo.com", "*.foo.com", "a.foo.com"}},
		{"*.foo.com", []string{"x.y.foo.com"}, []string{"x.y.foo.com"}},
		{"foo.com", []string{"bar.com"}, nil},
	} {
		if got := intersectHosts(tc.listener, tc.route); !slices.Equal(got, tc.want) {
			t.Errorf("intersect(%q, %q) = %q, want %q", tc.listener, tc.route, got, tc.want)
		}
	}
}

const attachDocs = gatewayClassDoc + `
---
kind: Namespace
metadata: {name: blue, labels: {team: blue}}
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: same, port: 80, protocol: HTTP, hostname: same.example}
  - {name: all, port: 8080, protocol: HTTP, allowedRoutes: {namespaces: {from: All}}}
  - name: sel
    port: 8081
    protocol: HTTP
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {team: blue}}}}
  - name: byname
    port: 8083
    protocol: HTTP
    allowedRoutes: {namespaces: {from: Selector, selector: {matchLabels: {kubernetes.io/metadata.name: other}}}}
  - {name: kinds, port: 8082, protocol: HTTP, allowedRoutes: {kinds: [{kind: TCPRoute}]}}
  - {name: unresolved, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: missing}]}}
---
kind: Gateway
metadata: {name: theirs}
spec:
  gatewayClassName: someone-else
  listeners: [{name: http, port: 80, protocol: HTTP}]
`

func attachRouteDoc(ns, name, parent, hostnames, path string) string {
	return "---\nkind: HTTPRoute\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec:\n" +
		"  parentRefs: [" + parent + "]\n  hostnames: [" + hostnames + "]\n" +
		"  rules: [{matches: [{path: {value: \"" + path + "\"}}], backendRefs: [{name: svc, port: 80}]}]\n"
}

func TestGatewayAttachment(t *testing.T) {
	docs := attachDocs
	type want struct {
		ns, name, parent, hostnames, path string
		reason                            gwv1.RouteConditionReason
	}
	cases := []want{
		{"default", "same", "{name: gw, sectionName: same}", "", "/", gwv1.RouteReasonAccepted},
		{"other", "other-same", "{name: gw, namespace: default, sectionName: same}", "", "/", gwv1.RouteReasonNotAllowedByListeners},
		{"other", "other-all", "{name: gw, namespace: default, sectionName: all}", "", "/", gwv1.RouteReasonAccepted},
		{"blue", "blue-sel", "{name: gw, namespace: default, sectionName: sel}", "", "/", gwv1.RouteReasonAccepted},
		{"other", "other-sel", "{name: gw, namespace: default, sectionName: sel}", "", "/", gwv1.RouteReasonNotAllowedByListeners},
		{"other", "other-byname", "{name: gw, namespace: default, sectionName: byname}", "", "/", gwv1.RouteReasonAccepted},
		{"default", "by-port", "{name: gw, port: 8080}", "", "/", gwv1.RouteReasonAccepted},
		{"default", "no-section", "{name: gw, sectionName: nope}", "", "/", gwv1.RouteReasonNoMatchingParent},
		{"default", "port-mismatch", "{name: gw, sectionName: all, port: 80}", "", "/", gwv1.RouteReasonNoMatchingParent},
		{"default", "kinds", "{name: gw, sectionName: kinds}", "", "/", gwv1.RouteReasonNotAllowedByListeners},
		{"default", "host", "{name: gw, sectionName: same}", "other.example", "/", gwv1.RouteReasonNoMatchingListenerHostname},
		{"default", "invalid", "{name: gw, sectionName: all}", "", "/a b", gwv1.RouteReasonUnsupportedValue},
		{"default", "to-unresolved", "{name: gw, sectionName: unresolved}", "", "/", gwv1.RouteReasonNotAllowedByListeners},
	}
	for _, c := range cases {
		docs += attachRouteDoc(c.ns, c.name, c.parent, c.hostnames, c.path)
	}
	docs += attachRouteDoc("default", "not-ours", "{name: theirs}", "", "/")
	// Two parentRefs selecting one listener: one attached route.
	docs += attachRouteDoc("blue", "twice", "{name: gw, namespace: default, sectionName: sel}, {name: gw, namespace: default, port: 8081}", "", "/")
	snap := gatewaySnap(t, docs)
	for _, ns := range []string{"default", "other", "blue"} {
		withServices(snap, ns, "svc")
	}
	res := Translate(snap, gatewayOpts())
	for _, c := range cases {
		parents := res.Gateway.Routes[routeRef(c.ns, c.name)]
		if len(parents) != 1 {
			t.Errorf("%s/%s: %d parent statuses", c.ns, c.name, len(parents))
			continue
		}
		got := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
		wantStatus := metav1.ConditionFalse
		if c.reason == gwv1.RouteReasonAccepted {
			wantStatus = metav1.ConditionTrue
		}
		if got.Reason != string(c.reason) || got.Status != wantStatus {
			t.Errorf("%s/%s: Accepted %s/%s (%s), want %s/%s", c.ns, c.name, got.Status, got.Reason, got.Message, wantStatus, c.reason)
		}
		if parents[0].ControllerName != translate.DefaultGatewayControllerName {
			t.Errorf("%s/%s: controllerName %q", c.ns, c.name, parents[0].ControllerName)
		}
	}
	if _, ok := res.Gateway.Routes[routeRef("default", "not-ours")]; ok {
		t.Error("a route of another controller's Gateway got a status from pier")
	}
	if res.Ours[gatewayRef("default", "theirs")] {
		t.Error("another controller's Gateway is marked ours")
	}
	// attachedRoutes counts what allowedRoutes and parentRefs select,
	// valid or not, on a listener with unresolved references too, but not
	// a route none of whose hostnames the listener's intersects (the
	// upstream suite's GatewayWithAttachedRoutes).
	attached := map[gwv1.SectionName]int32{"same": 1, "all": 3, "sel": 2, "byname": 1, "kinds": 0, "unresolved": 1}
	st := res.Gateway.Gateways[gatewayRef("default", "gw")]
	for _, l := range st.Listeners {
		if l.AttachedRoutes != attached[l.Name] {
			t.Errorf("listener %s: attachedRoutes %d, want %d", l.Name, l.AttachedRoutes, attached[l.Name])
		}
	}
	kinds := st.Listeners[4]
	if c := findCondition(t, kinds.Conditions, string(gwv1.ListenerConditionResolvedRefs)); c.Reason != string(gwv1.ListenerReasonInvalidRouteKinds) {
		t.Errorf("listener kinds: ResolvedRefs %s", c.Reason)
	}
	if len(kinds.SupportedKinds) != 0 {
		t.Errorf("listener kinds: supportedKinds %v", kinds.SupportedKinds)
	}
	// The route with the listener's hostname serves on it.
	lb := res.LoadBalancers[0]
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "same.example", path: "/"}); got != "svc" {
		t.Errorf("same.example on 80: %s", got)
	}
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "other.example", path: "/"}); got != "404" {
		t.Errorf("other.example on 80: %s, want 404 (the listener's hostname)", got)
	}
}

const refusalVictim = `
---
kind: HTTPRoute
metadata: {name: victim}
spec:
  parentRefs: [{name: gw}]
  hostnames: [victim.example]
  rules: [{backendRefs: [{name: svc, port: 80}]}]
`

func TestGatewayRouteRefusals(t *testing.T) {
	gw := gatewayClassDoc + "---\nkind: Gateway\nmetadata: {name: gw}\nspec:\n  gatewayClassName: pier\n" +
		"  listeners: [{name: http, port: 80, protocol: HTTP}]\n"
	for _, tc := range []struct {
		name, rule string
		hostnames  string
		strict     bool // GatewayExtendedMatches off
		field      string
	}{
		{"newline in path", `{matches: [{path: {value: "/a\nb"}}]}`, "", false, "spec.rules[0].matches[0]"},
		{"quote in path", `{matches: [{path: {value: "/a'b"}}]}`, "", false, "spec.rules[0].matches[0]"},
		{"dot segment", `{matches: [{path: {type: Exact, value: "/a/../b"}}]}`, "", false, "spec.rules[0].matches[0]"},
		{"regex path", `{matches: [{path: {type: RegularExpression, value: "/a.*"}}]}`, "", false, "spec.rules[0].matches[0]"},
		{"header name with colon", `{matches: [{headers: [{name: "X-A: b", value: v}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"header value with quote", `{matches: [{headers: [{name: X-A, value: "v' if TRUE #"}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"header value with CRLF", `{matches: [{headers: [{name: X-A, value: "v\r\nX: y"}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"regex header", `{matches: [{headers: [{type: RegularExpression, name: X-A, value: v}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"query value with ampersand", `{matches: [{queryParams: [{name: q, value: "a&b=c"}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"query value appended", `{matches: [{queryParams: [{name: q, value: "1;evil"}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"query value with a question mark", `{matches: [{queryParams: [{name: q, value: "a?b"}]}]}`, "", false, "spec.rules[0].matches[0]"},
		{"lowercase method", `{matches: [{method: get}]}`, "", false, "spec.rules[0].matches[0]"},
		{"uppercase hostname", `{}`, "Foo.example", false, "spec.hostnames[0]"},
		{"hostname with newline", `{}`, `"a.example\n"`, false, "spec.hostnames[0]"},
		{"filter", `{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: svc, port: 80}}}]}`, "", false, "spec.rules[0].filters[0]"},
		{"extended match not rendered yet", `{matches: [{method: GET}]}`, "", true, "spec.rules[0].matches[0]"},
		{"too many combinations", `{matches: [{path: {value: /a}}, {path: {value: /b}}]}`, "a.example, b.example", false, "spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := strings.TrimSuffix(tc.rule, "}")
			if rule != "{" {
				rule += ", "
			}
			rule += "backendRefs: [{name: svc, port: 80}]}"
			docs := gw + refusalVictim + "---\nkind: HTTPRoute\nmetadata: {name: bad}\nspec:\n  parentRefs: [{name: gw}]\n" +
				"  hostnames: [" + tc.hostnames + "]\n  rules: [" + rule + "]\n"
			snap := gatewaySnap(t, docs)
			withServices(snap, "default", "svc")
			opts := gatewayOpts()
			opts.GatewayExtendedMatches = !tc.strict
			opts.MaxPathsPerIngress = 3 // the victim has 1, the last case asks for 4
			res := Translate(snap, opts)
			parents := res.Gateway.Routes[routeRef("default", "bad")]
			if len(parents) != 1 {
				t.Fatalf("parents: %+v", parents)
			}
			c := findCondition(t, parents[0].Conditions, string(gwv1.RouteConditionAccepted))
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) {
				t.Errorf("Accepted %s/%s", c.Status, c.Reason)
			}
			var found bool
			for _, p := range res.Problems {
				if p.Kind == model.KindHTTPRoute && p.Name == "bad" && p.Field == tc.field && p.Severity == model.SeverityError {
					found = true
					if strings.ContainsAny(p.Message, "\r\n") {
						t.Errorf("problem message carries a control character: %q", p.Message)
					}
				}
			}
			if !found {
				t.Errorf("no Error problem on %s: %+v", tc.field, res.Problems)
			}
			// Everything else keeps serving, and nothing of the bad route
			// reaches the load balancer.
			if len(res.LoadBalancers) != 1 {
				t.Fatalf("load balancers: %d", len(res.LoadBalancers))
			}
			lb := res.LoadBalancers[0]
			if got := gatewayRoute(t, lb, 80, gwRequest{host: "victim.example", path: "/", method: "GET"}); got != "svc" {
				t.Errorf("victim: %s", got)
			}
			for _, p := range lb.Listeners[0].Policies {
				if p.Source.Name == "bad" {
					t.Errorf("policy %d from the refused route", p.Position)
				}
			}
		})
	}
}

// TestGatewayPoolsChecked: a Gateway's pools are checked as the
// operator's default says (a Gateway has no annotation for it).
func TestGatewayPoolsChecked(t *testing.T) {
	for _, on := range []bool{true, false} {
		snap := gatewaySnap(t, precedenceDocs)
		withServices(snap, "default", "prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
			"dup-first", "dup-second", "newer", "wild", "anyhost")
		opts := gatewayOpts()
		opts.HealthChecks = on
		res := Translate(snap, opts)
		if len(res.LoadBalancers) != 1 || len(res.LoadBalancers[0].Pools) == 0 {
			t.Fatalf("load balancers: %+v, problems %+v", res.LoadBalancers, res.Problems)
		}
		for _, p := range res.LoadBalancers[0].Pools {
			if p.HealthCheck != on {
				t.Errorf("HealthChecks %v: pool %s HealthCheck %v", on, p.Name, p.HealthCheck)
			}
		}
	}
}
