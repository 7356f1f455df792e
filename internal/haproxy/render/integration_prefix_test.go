package render

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// prefixFixture: x-forwarded-prefix alone, and with rewrite-target (the
// usual pair: strip the prefix, tell the backend what it was), beside a
// route of the same host without it.
func prefixFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("app.example"), pathPrefix("/app")), model.PolicyOptions{ForwardedPrefix: "/app"}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/shop")), model.PolicyOptions{ForwardedPrefix: "/shop", RewritePath: "/"}),
		toPool(web2, hostIs("app.example"), pathPrefix("/")),
	))}, web1, web2)
}

// startPrefixBackend answers with the X-Forwarded-Prefix lines it got.
func startPrefixBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Prefix", strings.Join(r.Header.Values("X-Forwarded-Prefix"), "|"))
		w.Header().Set("X-Seen-URI", r.RequestURI)
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestIntegrationForwardedPrefix: the backend of a route with
// x-forwarded-prefix gets exactly that header (a client's own is
// replaced), with rewrite-target too; another Ingress's route of the
// same host passes the client's header through untouched, as before.
func TestIntegrationForwardedPrefix(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	web1 := pool("prefixed", memberAt(startPrefixBackend(t, "prefixed")))
	web2 := pool("plain", memberAt(startPrefixBackend(t, "plain")))
	addr := serveLB(t, bin, prefixFixture(web1, web2))
	for _, tc := range []struct {
		path, clientHeader, backend, prefix, uri string
	}{
		{"/app/x", "", "prefixed", "/app", "/app/x"},
		{"/app/x", "X-Forwarded-Prefix: /evil\r\n", "prefixed", "/app", "/app/x"},
		{"/shop/cart?id=1", "", "prefixed", "/shop", "/?id=1"},
		{"/other", "X-Forwarded-Prefix: /mine\r\n", "plain", "/mine", "/other"},
		{"/other", "", "plain", "", "/other"},
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.path+" HTTP/1.1\r\nHost: app.example\r\n"+tc.clientHeader+"\r\n")
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-Prefix") != tc.prefix ||
			resp.Header.Get("X-Seen-URI") != tc.uri {
			t.Errorf("%s %q: %d backend %q prefix %q uri %q, want %q %q %q", tc.path, tc.clientHeader, resp.StatusCode,
				resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-Prefix"), resp.Header.Get("X-Seen-URI"), tc.backend, tc.prefix, tc.uri)
		}
	}
}
