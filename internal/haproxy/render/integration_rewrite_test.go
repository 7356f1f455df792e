package render

import (
	"io"
	"net"
	"net/http"
	"testing"

	"pier.dev/pier/internal/model"
)

// startURIBackend answers with the request URI it received (path and
// query string, as sent by HAProxy) in X-Seen-URI.
func startURIBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-URI", r.RequestURI)
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestIntegrationRewriteTarget runs rewrite-target through a real
// HAProxy, both with map lookups (policies in translation's order) and
// with ACL rules (another order): the backend receives the rewritten
// path with the query string kept, routing still chose the route by the
// original path (a rewrite to "/" does not fall to the host's catch-all,
// "/foobar" is not under "/foo"), and another Ingress's routes to the
// same pool are untouched.
func TestIntegrationRewriteTarget(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	rewritten := pool("rewritten", memberAt(startURIBackend(t, "rewritten")))
	catchAll := pool("catch-all", memberAt(startURIBackend(t, "catch-all")))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	exact := with(toPool(rewritten, hostIs("app.test"), pathIs("/old/login")), model.PolicyOptions{RewritePath: "/api/v1.2/login"})
	foo := with(toPool(rewritten, hostIs("app.test"), pathPrefix("/foo")), model.PolicyOptions{RewritePath: "/"})
	api := with(toPool(rewritten, hostIs("app.test"), pathPrefix("/api")), model.PolicyOptions{RewritePath: "/v2/"})
	root := toPool(catchAll, hostIs("app.test"), pathPrefix("/"))
	other := toPool(rewritten, hostIs("other.test"), pathPrefix("/foo"))
	for _, mode := range []struct {
		name     string
		policies []model.L7Policy
		mapped   bool
	}{
		{"maps", routes(exact, foo, api, other, root), true},
		{"acls", routes(foo, exact, api, other, root), false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			lb := newLB([]model.Listener{httpListener("", mode.policies)}, rewritten, catchAll)
			maps, err := Maps(lb, Options{Dir: t.TempDir(), MinSlots: 4})
			if err != nil {
				t.Fatal(err)
			}
			if (len(maps) > 0) != mode.mapped {
				t.Fatalf("%d map files, want mapped %v", len(maps), mode.mapped)
			}
			addr := serveLB(t, bin, lb)
			for _, tc := range []struct {
				host, uri, backend, seen string
			}{
				{"app.test", "/foo/bar?q=1", "rewritten", "/?q=1"},
				{"app.test", "/foo", "rewritten", "/"},
				{"app.test", "/foo/", "rewritten", "/"},
				{"app.test", "/foo/a/b?x=1&y=2", "rewritten", "/?x=1&y=2"},
				{"app.test", "/api/x?k=v", "rewritten", "/v2/?k=v"},
				{"app.test", "/old/login?next=/home", "rewritten", "/api/v1.2/login?next=/home"},
				{"app.test", "/old/login/x", "catch-all", "/old/login/x"},
				{"app.test", "/foobar?q=1", "catch-all", "/foobar?q=1"},
				{"app.test", "/", "catch-all", "/"},
				{"other.test", "/foo/bar?q=1", "rewritten", "/foo/bar?q=1"},
			} {
				resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.uri+" HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
				if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-URI") != tc.seen {
					t.Errorf("%s%s: %d backend %q saw %q, want 200 %q %q", tc.host, tc.uri, resp.StatusCode,
						resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-URI"), tc.backend, tc.seen)
				}
			}
		})
	}
}
