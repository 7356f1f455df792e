package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// stripFixture: the prefix-strip form (path "/shop.v1(/|$)(.*)",
// rewrite-target "/$2", and "/api(/|$)(.*)" with "/v2/$2"), beside the
// host's catch-all and another Ingress's route to the same pool.
func stripFixture(app, catchAll model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(app, hostIs("app.test"), pathPrefix("/shop.v1")), model.PolicyOptions{RewritePath: "/", StripPrefix: "/shop.v1"}),
		with(toPool(app, hostIs("app.test"), pathPrefix("/api")), model.PolicyOptions{RewritePath: "/v2/", StripPrefix: "/api"}),
		toPool(app, hostIs("other.test"), pathPrefix("/api")),
		toPool(catchAll, hostIs("app.test"), pathPrefix("/")),
	))}, app, catchAll)
}

func TestStripRevalidated(t *testing.T) {
	app := pool("app", member("10.0.0.1", 80))
	for name, o := range map[string]model.PolicyOptions{
		"no target":        {StripPrefix: "/a"},
		"target without /": {StripPrefix: "/a", RewritePath: "/v2"},
		"prefix /":         {StripPrefix: "/", RewritePath: "/"},
		"prefix ends /":    {StripPrefix: "/a/", RewritePath: "/"},
		"prefix evil":      {StripPrefix: "/a;evil", RewritePath: "/"},
		"prefix regex":     {StripPrefix: "/a(.*)", RewritePath: "/"},
		"prefix quote":     {StripPrefix: "/a'", RewritePath: "/"},
		"target format":    {StripPrefix: "/a", RewritePath: "/%[src]/"},
		"target group":     {StripPrefix: "/a", RewritePath: "/\\1/"},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(app, hostIs("a.example"), pathPrefix("/a"))))}, app)
		lb.Listeners[0].Policies[0].Options = &o
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestIntegrationStripPrefix runs the prefix-strip form through a real
// HAProxy: /shop.v1/cart?id=1 reaches the backend as /cart?id=1,
// /shop.v1 and /shop.v1/ as /, /api/users as /v2/users; /shop.v1x and
// /shopxv1 (the "." is literal) fall to the host's catch-all unchanged;
// another Ingress's /api route to the same pool is not rewritten.
func TestIntegrationStripPrefix(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	app := pool("app", memberAt(startURIBackend(t, "app")))
	catchAll := pool("catch-all", memberAt(startURIBackend(t, "catch-all")))
	addr := serveLB(t, bin, stripFixture(app, catchAll))
	for _, tc := range []struct{ host, uri, backend, seen string }{
		{"app.test", "/shop.v1/cart?id=1", "app", "/cart?id=1"},
		{"app.test", "/shop.v1/a/b/", "app", "/a/b/"},
		{"app.test", "/shop.v1", "app", "/"},
		{"app.test", "/shop.v1/", "app", "/"},
		{"app.test", "/shop.v1?x=1", "app", "/?x=1"},
		{"app.test", "/api/users", "app", "/v2/users"},
		{"app.test", "/api", "app", "/v2/"},
		{"app.test", "/shop.v1x", "catch-all", "/shop.v1x"},
		{"app.test", "/shopxv1/cart", "catch-all", "/shopxv1/cart"},
		{"app.test", "/apix/y", "catch-all", "/apix/y"},
		{"other.test", "/api/users", "app", "/api/users"},
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.uri+" HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-URI") != tc.seen {
			t.Errorf("%s%s: %d from %q as %q, want %s as %q", tc.host, tc.uri, resp.StatusCode,
				resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-URI"), tc.backend, tc.seen)
		}
	}
}
