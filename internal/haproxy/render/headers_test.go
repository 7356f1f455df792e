package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// gatewayFiltersFixture: Gateway API filters as translation fills them:
// header changes on request and response, redirects keeping or
// replacing host, port and path, and a prefix rewrite, beside a policy
// without options.
func gatewayFiltersFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("app.example"), pathIs("/moved")), model.PolicyOptions{Redirect: &model.Redirect{
			Scheme: "https", Host: "new.example", Port: 8443, FullPath: "/landing", Code: 301}}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/old")), model.PolicyOptions{Redirect: &model.Redirect{
			Scheme: "http", PrefixRewrite: &model.PrefixRewrite{Prefix: "/old", Replacement: "/v1.2"}, Code: 302}}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/api")), model.PolicyOptions{
			RequestHeaders: []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-Internal"},
				{Op: model.HeaderSet, Name: "X-Tenant", Value: "blue; v=1"}, {Op: model.HeaderAdd, Name: "X-Via", Value: "pier"}},
			ResponseHeaders: []model.HeaderOp{{Op: model.HeaderSet, Name: "Strict-Transport-Security", Value: "max-age=31536000; includeSubDomains"},
				{Op: model.HeaderRemove, Name: "X-Powered-By"}},
			UpstreamHost:  "api.internal",
			PrefixRewrite: &model.PrefixRewrite{Prefix: "/api", Replacement: ""}}),
		toPool(web2, hostIs("app.example"), pathPrefix("/")),
	))}, web1, web2)
}

// Render validates the options again: a store edited by hand cannot put
// a raw string in the file.
func TestGatewayFilterOptionsRefused(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	for _, tc := range []struct {
		name string
		o    model.PolicyOptions
		want string
	}{
		{"value CRLF", model.PolicyOptions{RequestHeaders: []model.HeaderOp{{Op: model.HeaderSet, Name: "X-A", Value: "a\r\nb: c"}}}, "header value"},
		{"value dollar", model.PolicyOptions{ResponseHeaders: []model.HeaderOp{{Op: model.HeaderAdd, Name: "X-A", Value: "${HOME}"}}}, "header value"},
		{"value with both quotes", model.PolicyOptions{ResponseHeaders: []model.HeaderOp{{Op: model.HeaderAdd, Name: "X-A", Value: `'a' "b"`}}}, "header value"},
		{"name ;evil", model.PolicyOptions{RequestHeaders: []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-A;evil"}}}, "header name"},
		{"framing header", model.PolicyOptions{RequestHeaders: []model.HeaderOp{{Op: model.HeaderSet, Name: "transfer-encoding", Value: "chunked"}}}, "frames"},
		{"unknown op", model.PolicyOptions{RequestHeaders: []model.HeaderOp{{Op: "append", Name: "X-A", Value: "v"}}}, "not set, add or remove"},
		{"remove with value", model.PolicyOptions{RequestHeaders: []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-A", Value: "v"}}}, "value to remove"},
		{"scheme", model.PolicyOptions{Redirect: &model.Redirect{Scheme: "javascript", Code: 302}}, "scheme"},
		{"host", model.PolicyOptions{Redirect: &model.Redirect{Scheme: "http", Host: "a.example/evil", Code: 302}}, "host"},
		{"code", model.PolicyOptions{Redirect: &model.Redirect{Scheme: "http", Code: 200}}, "redirect code"},
		{"port", model.PolicyOptions{Redirect: &model.Redirect{Scheme: "http", Port: 70000, Code: 302}}, "port"},
		{"full path", model.PolicyOptions{Redirect: &model.Redirect{Scheme: "http", FullPath: "/a'b", Code: 302}}, "path"},
		{"prefix regex", model.PolicyOptions{PrefixRewrite: &model.PrefixRewrite{Prefix: "/a(.*)", Replacement: "/b"}}, "prefix"},
		{"prefix slash", model.PolicyOptions{PrefixRewrite: &model.PrefixRewrite{Prefix: "/a/", Replacement: "/b"}}, "prefix"},
		{"both rewrites", model.PolicyOptions{RewritePath: "/x", PrefixRewrite: &model.PrefixRewrite{Prefix: "/a", Replacement: "/b"}}, "both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := toPool(web1, hostIs("app.example"), pathPrefix("/a"))
			p.Options = &tc.o
			lb := newLB([]model.Listener{httpListener("", routes(p))}, web1)
			_, err := Config(lb, fixtureOptions())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
