package render

import (
	"net"
	"net/http"
	"reflect"
	"sort"
	"testing"

	"pier.dev/pier/internal/model"
)

// startFilterBackend answers with what it received: each request header
// as X-Req-<Name> (every line kept), the URI as X-Seen-URI and the Host
// as X-Seen-Host; it also sends response headers for the response
// modifiers to change.
func startFilterBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		for k, vs := range r.Header {
			h["X-Req-"+k] = vs
		}
		h.Set("X-Backend", name)
		h.Set("X-Seen-URI", r.RequestURI)
		h.Set("X-Seen-Host", r.Host)
		h.Set("X-Backend-Remove", "yes")
		h.Set("X-Backend-Set", "orig")
		h.Set("X-Backend-Add", "orig")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestIntegrationGatewayFilters runs the Gateway API filters through a
// real HAProxy, with map lookups and with ACL rules: header changes on
// the request (the backend sees them) and on the response, scoped to the
// policy; redirects with every combination of scheme, host, port and
// path; prefix and host rewrites seen by the backend, routing still by
// the original path.
func TestIntegrationGatewayFilters(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	echo := pool("echo", memberAt(startFilterBackend(t, "echo")))
	other := pool("other", memberAt(startFilterBackend(t, "other")))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	redirect := func(r model.Redirect) model.PolicyOptions { return model.PolicyOptions{Redirect: &r} }
	prefix := func(p, r string) *model.PrefixRewrite { return &model.PrefixRewrite{Prefix: p, Replacement: r} }
	ps := []model.L7Policy{
		with(toPool(echo, hostIs("hdr.test"), pathPrefix("/")), model.PolicyOptions{
			RequestHeaders: []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-Remove"},
				{Op: model.HeaderSet, Name: "X-Set", Value: "set; v=1"}, {Op: model.HeaderAdd, Name: "X-Add", Value: "added"}},
			ResponseHeaders: []model.HeaderOp{{Op: model.HeaderRemove, Name: "x-backend-remove"},
				{Op: model.HeaderSet, Name: "X-Backend-Set", Value: "new"}, {Op: model.HeaderAdd, Name: "X-Backend-Add", Value: "more"},
				{Op: model.HeaderSet, Name: "Strict-Transport-Security", Value: "max-age=600; includeSubDomains"}}}),
		with(toPool(echo, hostIs("redir.test"), pathIs("/keep")), redirect(model.Redirect{Scheme: "http", Code: 302})),
		with(toPool(echo, hostIs("redir.test"), pathIs("/port")), redirect(model.Redirect{Scheme: "https", Port: 8443, Code: 301})),
		with(toPool(echo, hostIs("redir.test"), pathIs("/host")), redirect(model.Redirect{Scheme: "http", Host: "other.test", Port: 8080, Code: 308})),
		with(toPool(echo, hostIs("redir.test"), pathIs("/full")), redirect(model.Redirect{Scheme: "https", FullPath: "/landing", Code: 303})),
		with(toPool(echo, hostIs("redir.test"), pathPrefix("/old")), redirect(model.Redirect{Scheme: "http", PrefixRewrite: prefix("/old", "/new"), Code: 307})),
		with(toPool(echo, hostIs("redir.test"), pathPrefix("/strip")), redirect(model.Redirect{Scheme: "https", Host: "s.test", PrefixRewrite: prefix("/strip", ""), Code: 301})),
		with(toPool(echo, hostIs("rw.test"), pathIs("/exact")), model.PolicyOptions{RewritePath: "/replaced"}),
		with(toPool(echo, hostIs("rw.test"), pathPrefix("/api")), model.PolicyOptions{PrefixRewrite: prefix("/api", "/v2"), UpstreamHost: "backend.internal"}),
		with(toPool(echo, hostIs("rw.test"), pathPrefix("/strip")), model.PolicyOptions{PrefixRewrite: prefix("/strip", "")}),
		with(toPool(echo, hostIs("rw.test"), pathPrefix("/")), model.PolicyOptions{PrefixRewrite: prefix("", "/root")}),
		toPool(other, hostIs("plain.test"), pathPrefix("/")),
	}
	// Translation's order, which map lookups need: Exact paths first,
	// then longer prefixes.
	pathOf := func(p model.L7Policy) model.L7Rule { return p.Rules[len(p.Rules)-1] }
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := pathOf(ps[i]), pathOf(ps[j])
		if a.Compare != b.Compare {
			return a.Compare == model.CompareEqualTo
		}
		return len(a.Value) > len(b.Value)
	})
	for _, mode := range []struct {
		name     string
		policies []model.L7Policy
		mapped   bool
	}{
		{"maps", routes(ps...), true},
		// A host-less route first makes the order unsortable: ACL rules.
		{"acls", routes(append([]model.L7Policy{toPool(other, pathIs("/catch"))}, ps...)...), false},
	} {
		t.Run(mode.name, func(t *testing.T) {
			lb := newLB([]model.Listener{httpListener("", mode.policies)}, echo, other)
			if maps, err := Maps(lb, Options{Dir: t.TempDir(), MinSlots: 4}); err != nil || (len(maps) > 0) != mode.mapped {
				t.Fatalf("%d map files (%v), want mapped %v", len(maps), err, mode.mapped)
			}
			addr := serveLB(t, bin, lb)
			get := func(host, uri, extra string) *http.Response {
				return rawRequest(t, addr, "127.0.0.1", "GET "+uri+" HTTP/1.1\r\nHost: "+host+"\r\n"+extra+"\r\n")
			}
			t.Run("headers", func(t *testing.T) { gatewayHeaderCases(t, get) })
			t.Run("redirects", func(t *testing.T) { gatewayRedirectCases(t, get) })
			t.Run("rewrites", func(t *testing.T) { gatewayRewriteCases(t, get) })
		})
	}
}

type getFunc func(host, uri, extra string) *http.Response

func gatewayHeaderCases(t *testing.T, get getFunc) {
	client := "x-remove: a\r\nX-REMOVE: b\r\nx-set: client\r\nX-Add: client\r\nX-Keep: k\r\n"
	resp := get("hdr.test", "/x", client)
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"X-Req-X-Remove", nil},
		{"X-Req-X-Set", []string{"set; v=1"}},
		{"X-Req-X-Add", []string{"client", "added"}},
		{"X-Req-X-Keep", []string{"k"}},
		{"X-Backend-Remove", nil},
		{"X-Backend-Set", []string{"new"}},
		{"X-Backend-Add", []string{"orig", "more"}},
		{"Strict-Transport-Security", []string{"max-age=600; includeSubDomains"}},
	} {
		if got := resp.Header.Values(tc.name); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("hdr.test %s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "echo" {
		t.Errorf("hdr.test: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
	// Another route on the same load balancer: nothing changes.
	resp = get("plain.test", "/x", client)
	if got := resp.Header.Values("X-Req-X-Remove"); len(got) != 2 || resp.Header.Get("X-Req-X-Set") != "client" ||
		len(resp.Header.Values("X-Req-X-Add")) != 1 || resp.Header.Get("X-Backend-Remove") != "yes" ||
		resp.Header.Get("X-Backend-Set") != "orig" || len(resp.Header.Values("X-Backend-Add")) != 1 ||
		resp.Header.Get("Strict-Transport-Security") != "" || resp.Header.Get("X-Backend") != "other" {
		t.Errorf("plain.test changed: %v", resp.Header)
	}
}

func gatewayRedirectCases(t *testing.T, get getFunc) {
	for _, tc := range []struct {
		host, uri string
		code      int
		location  string
	}{
		{"redir.test", "/keep", 302, "http://redir.test/keep"},
		{"redir.test:8080", "/keep?q=1&r=2", 302, "http://redir.test/keep?q=1&r=2"},
		{"REDIR.test", "/keep", 302, "http://REDIR.test/keep"},
		{"redir.test", "/port?q=1", 301, "https://redir.test:8443/port?q=1"},
		{"redir.test:99", "/host?a=b", 308, "http://other.test:8080/host?a=b"},
		{"redir.test", "/full?q=1", 303, "https://redir.test/landing?q=1"},
		{"redir.test", "/old", 307, "http://redir.test/new"},
		{"redir.test", "/old/", 307, "http://redir.test/new/"},
		{"redir.test", "/old/a/b?x=1", 307, "http://redir.test/new/a/b?x=1"},
		{"redir.test", "/strip", 301, "https://s.test/"},
		{"redir.test", "/strip/", 301, "https://s.test/"},
		{"redir.test", "/strip/a?x=1", 301, "https://s.test/a?x=1"},
	} {
		resp := get(tc.host, tc.uri, "")
		if resp.StatusCode != tc.code || resp.Header.Get("Location") != tc.location || resp.Header.Get("X-Backend") != "" {
			t.Errorf("%s%s: %d %q (backend %q), want %d %q", tc.host, tc.uri, resp.StatusCode, resp.Header.Get("Location"),
				resp.Header.Get("X-Backend"), tc.code, tc.location)
		}
	}
	// Not under the redirected prefix: served.
	if resp := get("redir.test", "/oldies", ""); resp.StatusCode != 404 {
		t.Errorf("/oldies: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func gatewayRewriteCases(t *testing.T, get getFunc) {
	for _, tc := range []struct {
		uri, seen, host string
	}{
		{"/api", "/v2", "backend.internal"},
		{"/api/", "/v2/", "backend.internal"},
		{"/api/x/y?q=1", "/v2/x/y?q=1", "backend.internal"},
		{"/strip", "/", "rw.test"},
		{"/strip/", "/", "rw.test"},
		{"/strip/a?b=c", "/a?b=c", "rw.test"},
		{"/exact?q=1", "/replaced?q=1", "rw.test"},
		{"/", "/root/", "rw.test"},
		{"/apix", "/root/apix", "rw.test"},
		{"/stripped?k=v", "/root/stripped?k=v", "rw.test"},
	} {
		resp := get("rw.test", tc.uri, "")
		if resp.StatusCode != 200 || resp.Header.Get("X-Seen-URI") != tc.seen || resp.Header.Get("X-Seen-Host") != tc.host {
			t.Errorf("rw.test%s: %d saw %q host %q, want %q %q", tc.uri, resp.StatusCode,
				resp.Header.Get("X-Seen-URI"), resp.Header.Get("X-Seen-Host"), tc.seen, tc.host)
		}
	}
}
