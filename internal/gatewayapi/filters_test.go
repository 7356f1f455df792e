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
	"pier.dev/pier/internal/translate"
)

// filterGateway has an HTTP listener on 80 and 8080 and an HTTPS one on
// 8443, so one route shows the redirect's port rules on each.
const filterGateway = gatewayClassDoc + `
---
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, port: 80, protocol: HTTP}
  - {name: alt, port: 8080, protocol: HTTP}
  - {name: tls, port: 8443, protocol: HTTPS, tls: {certificateRefs: [{name: tls}]}}
`

// filterResult translates filterGateway, the victim route and a route
// "r" with rules (YAML flow sequence), with Service svc.
func filterResult(t *testing.T, rules string) *translate.Result {
	t.Helper()
	docs := filterGateway + refusalVictim + "---\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  parentRefs: [{name: gw}]\n" +
		"  hostnames: [app.example]\n  rules: " + rules + "\n"
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "tls", "app.example"))
	return Translate(snap, gatewayOpts())
}

// routeOptions returns the options of route r's policies on port, by path.
func routeOptions(t *testing.T, res *translate.Result, port int) map[string]*model.PolicyOptions {
	t.Helper()
	if len(res.LoadBalancers) != 1 {
		t.Fatalf("load balancers %d: %+v", len(res.LoadBalancers), res.Problems)
	}
	out := map[string]*model.PolicyOptions{}
	for _, l := range res.LoadBalancers[0].Listeners {
		if l.Port != port {
			continue
		}
		for _, p := range l.Policies {
			if p.Source.Name != "r" {
				continue
			}
			for _, r := range p.Rules {
				if r.Type == model.RulePath {
					out[string(r.Compare)+" "+r.Value] = p.Options
				}
			}
		}
	}
	return out
}

// Header modifiers become ordered operations (remove, set, add) on
// request and response, the same on every listener; a rule without
// filters has no options.
func TestGatewayHeaderFilters(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {value: /h}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: X-Set, value: "a b; c=d"}, {name: x-other, value: "1"}]
        add: [{name: X-Add, value: "v,w"}]
        remove: [X-Remove, x-two]
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: Cache-Control, value: no-store}]
        remove: [Server]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: svc, port: 80}]`)
	wantReq := []model.HeaderOp{
		{Op: model.HeaderRemove, Name: "X-Remove"}, {Op: model.HeaderRemove, Name: "x-two"},
		{Op: model.HeaderSet, Name: "X-Set", Value: "a b; c=d"}, {Op: model.HeaderSet, Name: "x-other", Value: "1"},
		{Op: model.HeaderAdd, Name: "X-Add", Value: "v,w"},
	}
	wantRes := []model.HeaderOp{{Op: model.HeaderRemove, Name: "Server"}, {Op: model.HeaderSet, Name: "Cache-Control", Value: "no-store"}}
	for _, port := range []int{80, 8080, 8443} {
		opts := routeOptions(t, res, port)
		o := opts["STARTS_WITH /h"]
		if o == nil || !reflect.DeepEqual(o.RequestHeaders, wantReq) || !reflect.DeepEqual(o.ResponseHeaders, wantRes) {
			t.Errorf("port %d: options %+v", port, o)
		}
		if o := opts["STARTS_WITH /plain"]; o != nil {
			t.Errorf("port %d: a rule without filters has options %+v", port, o)
		}
	}
	assertAccepted(t, res)
}

func assertAccepted(t *testing.T, res *translate.Result) {
	t.Helper()
	c := findCondition(t, res.Gateway.Routes[routeRef("default", "r")][0].Conditions, string(gwv1.RouteConditionAccepted))
	if c.Status != metav1.ConditionTrue {
		t.Errorf("route r: Accepted %s/%s %s; problems %+v", c.Status, c.Reason, c.Message, res.Problems)
	}
}

// URLRewrite: hostname becomes UpstreamHost, a full path RewritePath, a
// prefix replacement the prefix of each PathPrefix match ("/" as "").
func TestGatewayURLRewrite(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {value: /full}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: backend.internal, path: {type: ReplaceFullPath, replaceFullPath: /new/full}}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /api/v1/}}, {path: {value: /}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v2/}}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: svc, port: 80}]`)
	assertAccepted(t, res)
	opts := routeOptions(t, res, 80)
	for path, want := range map[string]model.PolicyOptions{
		"STARTS_WITH /full":   {UpstreamHost: "backend.internal", RewritePath: "/new/full"},
		"STARTS_WITH /api/v1": {PrefixRewrite: &model.PrefixRewrite{Prefix: "/api/v1", Replacement: "/v2"}},
		"STARTS_WITH /":       {PrefixRewrite: &model.PrefixRewrite{Prefix: "", Replacement: "/v2"}},
		"STARTS_WITH /strip":  {PrefixRewrite: &model.PrefixRewrite{Prefix: "/strip", Replacement: ""}},
	} {
		if got := opts[path]; got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("%s: %+v, want %+v", path, got, want)
		}
	}
}

// RequestRedirect: the spec's scheme and port rules, per listener.
func TestGatewayRedirect(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {type: Exact, value: /same}}]
    filters: [{type: RequestRedirect, requestRedirect: {}}]
  - matches: [{path: {type: Exact, value: /https}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}]
  - matches: [{path: {type: Exact, value: /http}}]
    filters: [{type: RequestRedirect, requestRedirect: {scheme: http}}]
  - matches: [{path: {type: Exact, value: /port}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: other.example, port: 443, statusCode: 308}}]
  - matches: [{path: {type: Exact, value: /full}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: /to}}}]
  - matches: [{path: {value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}, statusCode: 307}}]`)
	assertAccepted(t, res)
	type want struct {
		path string
		port int // listener
		r    model.Redirect
	}
	for _, w := range []want{
		{"EQUAL_TO /same", 80, model.Redirect{Scheme: "http", Code: 302}},
		{"EQUAL_TO /same", 8080, model.Redirect{Scheme: "http", Port: 8080, Code: 302}},
		{"EQUAL_TO /same", 8443, model.Redirect{Scheme: "https", Port: 8443, Code: 302}},
		{"EQUAL_TO /https", 80, model.Redirect{Scheme: "https", Code: 301}},
		{"EQUAL_TO /https", 8080, model.Redirect{Scheme: "https", Code: 301}},
		{"EQUAL_TO /https", 8443, model.Redirect{Scheme: "https", Code: 301}},
		{"EQUAL_TO /http", 8443, model.Redirect{Scheme: "http", Code: 302}},
		{"EQUAL_TO /port", 80, model.Redirect{Scheme: "http", Host: "other.example", Port: 443, Code: 308}},
		{"EQUAL_TO /port", 8443, model.Redirect{Scheme: "https", Host: "other.example", Code: 308}},
		{"EQUAL_TO /full", 8080, model.Redirect{Scheme: "http", Port: 8080, FullPath: "/to", Code: 302}},
		{"STARTS_WITH /old", 80, model.Redirect{Scheme: "http", Code: 307,
			PrefixRewrite: &model.PrefixRewrite{Prefix: "/old", Replacement: "/new"}}},
	} {
		o := routeOptions(t, res, w.port)[w.path]
		if o == nil || o.Redirect == nil || !reflect.DeepEqual(*o.Redirect, w.r) {
			t.Errorf("%s on %d: %+v, want %+v", w.path, w.port, o, w.r)
		}
	}
}

// Every invalid filter value refuses that route only, naming the field;
// the victim keeps serving. ";evil" appended to a valid value fails
// wherever the value is a name, host, path, scheme or
// number; a header value may hold ";" (Content-Type, Strict-Transport-
// Security), never a control byte, quote or "%".
func TestGatewayFilterRefusals(t *testing.T) {
	const rule0 = "spec.rules[0].filters[0]"
	reqHdr := func(spec string) string {
		return `{filters: [{type: RequestHeaderModifier, requestHeaderModifier: ` + spec + `}]}`
	}
	redirect := func(spec string) string {
		return `{filters: [{type: RequestRedirect, requestRedirect: ` + spec + `}]}`
	}
	rewrite := func(spec string) string {
		return `{filters: [{type: URLRewrite, urlRewrite: ` + spec + `}]}`
	}
	// A backendRef's URLRewrite, the rule's one ref.
	refRewrite := func(spec string) string {
		return `{backendRefs: [{name: svc, port: 80, filters: [{type: URLRewrite, urlRewrite: ` + spec + `}]}]}`
	}
	const refRewrite0 = "spec.rules[0].backendRefs[0].filters[0].urlRewrite"
	for _, tc := range []struct {
		name, rule, field, message string
	}{
		{"header value CRLF", reqHdr(`{set: [{name: X-A, value: "v\r\nX-Evil: y"}]}`), rule0 + ".requestHeaderModifier", "set[0].value"},
		{"header value LF", reqHdr(`{add: [{name: X-A, value: "v\nX-Evil: y"}]}`), rule0 + ".requestHeaderModifier", "add[0].value"},
		{"header value both quotes", reqHdr(`{set: [{name: X-A, value: "v' \" if TRUE"}]}`), rule0 + ".requestHeaderModifier", "set[0].value"},
		{"header value variable", reqHdr(`{set: [{name: X-A, value: "${HOME}"}]}`), rule0 + ".requestHeaderModifier", "set[0].value"},
		{"header name ;evil", reqHdr(`{set: [{name: "X-A;evil", value: v}]}`), rule0 + ".requestHeaderModifier", "set[0].name"},
		{"header name space", reqHdr(`{remove: ["X-A evil"]}`), rule0 + ".requestHeaderModifier", "remove[0].name"},
		{"header twice", reqHdr(`{set: [{name: X-A, value: v}, {name: x-a, value: w}]}`), rule0 + ".requestHeaderModifier", "set[1].name"},
		{"content-length", `{filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: Content-Length, value: "0"}]}}]}`,
			rule0 + ".responseHeaderModifier", "set[0].name"},
		{"transfer-encoding", reqHdr(`{remove: [Transfer-Encoding]}`), rule0 + ".requestHeaderModifier", "remove[0].name"},
		{"host header", reqHdr(`{set: [{name: Host, value: a.example}]}`), rule0 + ".requestHeaderModifier", "set[0].name"},
		{"empty modifier", reqHdr(`{}`), rule0 + ".requestHeaderModifier", "no header"},
		{"modifier without settings", `{filters: [{type: RequestHeaderModifier}]}`, rule0, "without its settings"},
		{"two modifiers", `{filters: [{type: RequestHeaderModifier, requestHeaderModifier: {remove: [X-A]}}, ` +
			`{type: RequestHeaderModifier, requestHeaderModifier: {remove: [X-B]}}]}`, "spec.rules[0].filters[1]", "second"},
		{"scheme ftp", redirect(`{scheme: ftp}`), rule0 + ".requestRedirect", "scheme"},
		{"scheme ;evil", redirect(`{scheme: "https;evil"}`), rule0 + ".requestRedirect", "scheme"},
		{"hostname ;evil", redirect(`{hostname: "a.example;evil"}`), rule0 + ".requestRedirect", "hostname"},
		{"hostname wildcard", redirect(`{hostname: "*.a.example"}`), rule0 + ".requestRedirect", "hostname"},
		{"status 304", redirect(`{statusCode: 304}`), rule0 + ".requestRedirect", "statusCode"},
		{"port 0", redirect(`{port: 0}`), rule0 + ".requestRedirect", "port"},
		{"path ;evil", redirect(`{path: {type: ReplaceFullPath, replaceFullPath: "/a;evil"}}`), rule0 + ".requestRedirect", "replaceFullPath"},
		{"path CRLF", redirect(`{path: {type: ReplaceFullPath, replaceFullPath: "/a\r\nLocation: x"}}`), rule0 + ".requestRedirect", "replaceFullPath"},
		{"path percent", redirect(`{path: {type: ReplaceFullPath, replaceFullPath: "/%[src]"}}`), rule0 + ".requestRedirect", "replaceFullPath"},
		{"path type mismatch", redirect(`{path: {type: ReplaceFullPath, replacePrefixMatch: /a}}`), rule0 + ".requestRedirect", "path"},
		{"rewrite prefix ;evil", rewrite(`{path: {type: ReplacePrefixMatch, replacePrefixMatch: "/a;evil"}}`), rule0 + ".urlRewrite", "replacePrefixMatch"},
		{"rewrite prefix regex", rewrite(`{path: {type: ReplacePrefixMatch, replacePrefixMatch: "/a\\1"}}`), rule0 + ".urlRewrite", "replacePrefixMatch"},
		{"rewrite hostname ;evil", rewrite(`{hostname: "b.example;evil"}`), rule0 + ".urlRewrite", "hostname"},
		{"rewrite empty", rewrite(`{}`), rule0 + ".urlRewrite", "neither"},
		{"prefix on exact match", `{matches: [{path: {type: Exact, value: /a}}], filters: [{type: URLRewrite, urlRewrite: ` +
			`{path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]}`, "spec.rules[0].filters", "PathPrefix"},
		{"prefix on a path with ;", `{matches: [{path: {value: "/a;b"}}], filters: [{type: URLRewrite, urlRewrite: ` +
			`{path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}}]}`, "spec.rules[0].filters", "ReplacePrefixMatch"},
		{"redirect and rewrite", `{filters: [{type: RequestRedirect, requestRedirect: {}}, {type: URLRewrite, urlRewrite: {hostname: b.example}}]}`,
			"spec.rules[0].filters", "exclude"},
		{"mirror", `{filters: [{type: RequestMirror, requestMirror: {backendRef: {name: svc, port: 80}}}]}`, rule0, "not supported"},
		{"extension ref", `{filters: [{type: ExtensionRef, extensionRef: {group: x.example, kind: X, name: x}}]}`, rule0, "not supported"},
		{"unknown type", `{filters: [{type: Teleport}]}`, rule0, "not supported"},
		{"backend response filter", `{backendRefs: [{name: svc, port: 80, filters: [{type: ResponseHeaderModifier, responseHeaderModifier: {remove: [X-A]}}]}]}`,
			"spec.rules[0].backendRefs[0].filters[0]", "not supported on a backendRef"},
		{"backend redirect", `{backendRefs: [{name: svc, port: 80}, {name: svc, port: 80, filters: [{type: RequestRedirect, requestRedirect: {}}]}]}`,
			"spec.rules[0].backendRefs[1].filters[0]", "not supported on a backendRef"},
		{"backend header CRLF", `{backendRefs: [{name: svc, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-A, value: "v\r\nX-Evil: y"}]}}]}]}`,
			"spec.rules[0].backendRefs[0].filters[0].requestHeaderModifier", "set[0].value"},
		{"backend header host", `{backendRefs: [{name: svc, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Host, value: a.example}]}}]}]}`,
			"spec.rules[0].backendRefs[0].filters[0].requestHeaderModifier", "set[0].name"},
		{"backend two modifiers", `{backendRefs: [{name: svc, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {remove: [X-A]}}, ` +
			`{type: RequestHeaderModifier, requestHeaderModifier: {remove: [X-B]}}]}]}`, "spec.rules[0].backendRefs[0].filters[1]", "second"},
		{"backend modifier without settings", `{backendRefs: [{name: svc, port: 80, filters: [{type: RequestHeaderModifier}]}]}`,
			"spec.rules[0].backendRefs[0].filters[0]", "without its settings"},
		{"backend rewrite hostname", refRewrite(`{hostname: b.example}`), refRewrite0 + ".hostname", "not supported on a backendRef"},
		{"backend rewrite without path", refRewrite(`{}`), refRewrite0, "no path"},
		{"backend rewrite ;evil", refRewrite(`{path: {type: ReplaceFullPath, replaceFullPath: "/a;evil"}}`), refRewrite0 + ".path", "replaceFullPath"},
		{"backend rewrite percent", refRewrite(`{path: {type: ReplacePrefixMatch, replacePrefixMatch: "/%[src]"}}`), refRewrite0 + ".path", "replacePrefixMatch"},
		{"backend prefix on exact match", `{matches: [{path: {type: Exact, value: /a}}], ` + refRewrite(`{path: {type: ReplacePrefixMatch, replacePrefixMatch: /b}}`)[1:],
			refRewrite0 + ".path", "PathPrefix"},
		{"backend prefix of two prefixes", `{matches: [{path: {value: /a}}, {path: {value: /b}}], ` + refRewrite(`{path: {type: ReplacePrefixMatch, replacePrefixMatch: /c}}`)[1:],
			refRewrite0 + ".path", "one prefix"},
		{"backend rewrite after a rule's", `{filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /x}}}], ` +
			refRewrite(`{path: {type: ReplaceFullPath, replaceFullPath: /y}}`)[1:], refRewrite0, "already rewrite"},
		{"backend two rewrites", `{backendRefs: [{name: svc, port: 80, filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /x}}}, ` +
			`{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /y}}}]}]}`, "spec.rules[0].backendRefs[0].filters[1]", "second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := tc.rule
			if !strings.Contains(rule, "backendRefs") {
				rule = strings.TrimSuffix(rule, "}") + ", backendRefs: [{name: svc, port: 80}]}"
			}
			res := filterResult(t, "["+rule+"]")
			c := findCondition(t, res.Gateway.Routes[routeRef("default", "r")][0].Conditions, string(gwv1.RouteConditionAccepted))
			if c.Status != metav1.ConditionFalse || c.Reason != string(gwv1.RouteReasonUnsupportedValue) {
				t.Errorf("Accepted %s/%s", c.Status, c.Reason)
			}
			found := false
			for _, p := range res.Problems {
				if p.Name == "r" && p.Severity == model.SeverityError {
					found = p.Field == tc.field && strings.Contains(p.Message, tc.message)
					if !found {
						t.Errorf("problem %s: %s, want %s: ...%s...", p.Field, p.Message, tc.field, tc.message)
					}
					if strings.ContainsAny(p.Message, "\r\n") {
						t.Errorf("message carries a control byte: %q", p.Message)
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

// What translation makes of every filter renders (render validates the
// options again) into the lines that apply them.
func TestGatewayFiltersRender(t *testing.T) {
	res := filterResult(t, `
  - matches: [{path: {value: /h}}]
    filters:
    - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Set, value: "a; b"}], add: [{name: X-Add, value: v}], remove: [X-Remove]}}
    - {type: ResponseHeaderModifier, responseHeaderModifier: {add: [{name: X-Res, value: r}]}}
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /old}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: new.example, path: {type: ReplacePrefixMatch, replacePrefixMatch: /new}}}]
  - matches: [{path: {value: /api}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: api.internal, path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
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
		"http-request del-header 'X-Remove' if ",
		"http-request set-header 'X-Set' 'a; b' if ",
		"http-request add-header 'X-Add' 'v' if ",
		"http-response add-header 'X-Res' 'r' if ",
		"http-request replace-path '^/old(/.*)?$' '/new\\1' if ",
		"http-request redirect location 'http://new.example%[pathq]' code 302 if ",
		"http-request redirect location 'http://new.example:8080%[pathq]' code 302 if ",
		"http-request redirect location 'https://new.example:8443%[pathq]' code 302 if ",
		"http-request set-header Host 'api.internal' if ",
		"http-request replace-path '^/api/?(.*)$' '/\\1' if ",
	} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no line %q in\n%s", want, r.Fragment)
		}
	}
}
