package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// poolRewriteFixture: pools of their own rewriting the path (an
// HTTPRoute backendRef's URLRewrite), one with header changes too,
// beside the Service's plain pool.
func poolRewriteFixture(web1, web2 model.Pool) *model.LoadBalancer {
	full, prefix, root := web1, web1, web2
	full.ID, full.RewritePath = "ref-full", "/rewritten-full"
	prefix.ID, prefix.PrefixRewrite = "ref-prefix", &model.PrefixRewrite{Prefix: "/prefix", Replacement: "/rewritten-prefix"}
	prefix.RequestHeaders = []model.HeaderOp{{Op: model.HeaderSet, Name: "Backend", Value: "v1"}}
	root.ID, root.PrefixRewrite = "ref-strip", &model.PrefixRewrite{Prefix: "/strip", Replacement: ""}
	return newLB([]model.Listener{httpListener("", routes(
		toPool(full, hostIs("rw.example"), pathPrefix("/full")),
		toPool(prefix, hostIs("rw.example"), pathPrefix("/prefix")),
		toPool(root, hostIs("rw.example"), pathPrefix("/strip")),
		toPool(web1, hostIs("rw.example"), pathPrefix("/")),
	))}, web1, full, prefix, root)
}

// A pool rewrite translation would not make is refused, not rendered.
func TestPoolRewriteRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	for name, set := range map[string]func(p *model.Pool){
		"both": func(p *model.Pool) {
			p.RewritePath, p.PrefixRewrite = "/a", &model.PrefixRewrite{Prefix: "/b", Replacement: "/c"}
		},
		"path ;evil":         func(p *model.Pool) { p.RewritePath = "/a;evil" },
		"path CRLF":          func(p *model.Pool) { p.RewritePath = "/a\r\nserver x 1.2.3.4:80" },
		"path percent":       func(p *model.Pool) { p.RewritePath = "/%[src]" },
		"relative path":      func(p *model.Pool) { p.RewritePath = "a" },
		"prefix quote":       func(p *model.Pool) { p.PrefixRewrite = &model.PrefixRewrite{Prefix: "/a'", Replacement: "/b"} },
		"replacement regex":  func(p *model.Pool) { p.PrefixRewrite = &model.PrefixRewrite{Prefix: "/a", Replacement: `/b\1`} },
		"replacement slash":  func(p *model.Pool) { p.PrefixRewrite = &model.PrefixRewrite{Prefix: "/a", Replacement: "/b/"} },
		"a TCP pool rewrite": func(p *model.Pool) { p.TCP, p.RewritePath = true, "/a" },
	} {
		bad := web
		set(&bad)
		lb := newLB([]model.Listener{httpListener(bad.ID, nil)}, bad)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("pool rewrite %s rendered", name)
		}
	}
}

// TestIntegrationPoolRewrite: through a real HAProxy, a pool's full path
// and prefix rewrites reach the member (the suite's
// HTTPRouteBackendURLRewrite), with its header changes, the query kept;
// the Service's plain pool sees the path as sent.
func TestIntegrationPoolRewrite(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	one := pool("one", memberAt(startFilterBackend(t, "one")))
	two := pool("two", memberAt(startFilterBackend(t, "two")))
	addr := serveLB(t, bin, poolRewriteFixture(one, two))
	for _, tc := range []struct{ path, backend, uri, header string }{
		{"/full/original", "one", "/rewritten-full", ""},
		{"/full?q=1", "one", "/rewritten-full?q=1", ""},
		{"/prefix/original", "one", "/rewritten-prefix/original", "v1"},
		{"/prefix", "one", "/rewritten-prefix", "v1"},
		{"/strip/a/b", "two", "/a/b", ""},
		{"/strip", "two", "/", ""},
		{"/prefixed", "one", "/prefixed", ""},
		{"/other", "one", "/other", ""},
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.path+" HTTP/1.1\r\nHost: rw.example\r\n\r\n")
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-URI") != tc.uri ||
			resp.Header.Get("X-Req-Backend") != tc.header {
			t.Errorf("%s: %d from %q, saw %q with Backend %q; want %s, %q, %q", tc.path, resp.StatusCode, resp.Header.Get("X-Backend"),
				resp.Header.Get("X-Seen-URI"), resp.Header.Get("X-Req-Backend"), tc.backend, tc.uri, tc.header)
		}
	}
}
