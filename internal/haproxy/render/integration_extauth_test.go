package render

import (
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// extAuthFixture: auth-url on app.test (with auth-signin and two
// response headers) and on api.test (HEAD, no headers), beside a route
// of another Ingress on the same host and pool without it.
func extAuthFixture(app, other, auth model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		toPool(app, hostIs("app.test"), pathPrefix("/public")),
		with(toPool(app, hostIs("app.test"), pathPrefix("/")), model.PolicyOptions{ExternalAuth: &model.ExternalAuth{
			PoolID: auth.ID, Host: "oauth2-proxy.ns.svc", Path: "/oauth2/auth", Method: "GET",
			SigninURL: "https://login.test/oauth2/start", ResponseHeaders: []string{"X-Auth-Request-User", "X-Auth-Request-Email"}}}),
		with(toPool(app, hostIs("api.test"), pathPrefix("/")), model.PolicyOptions{ExternalAuth: &model.ExternalAuth{
			PoolID: auth.ID, Host: "oauth2-proxy.ns.svc.cluster.local", Path: "/check", Method: "HEAD"}}),
		toPool(other, hostIs("other.test"), pathPrefix("/")),
	))}, app, other, auth)
}

func TestExtAuthRevalidated(t *testing.T) {
	app, auth := pool("app", member("10.0.0.1", 80)), pool("auth", member("10.0.0.2", 80))
	good := model.ExternalAuth{PoolID: auth.ID, Host: "auth.ns.svc", Path: "/auth", Method: "GET"}
	for name, mutate := range map[string]func(e *model.ExternalAuth){
		"missing pool":   func(e *model.ExternalAuth) { e.PoolID = model.ID("nope") },
		"method":         func(e *model.ExternalAuth) { e.Method = "DELETE" },
		"method evil":    func(e *model.ExternalAuth) { e.Method = "GET;evil" },
		"host evil":      func(e *model.ExternalAuth) { e.Host = "auth.ns.svc evil" },
		"path format":    func(e *model.ExternalAuth) { e.Path = "/%[src]" },
		"path quote":     func(e *model.ExternalAuth) { e.Path = "/a'b" },
		"header evil":    func(e *model.ExternalAuth) { e.ResponseHeaders = []string{"X-User;evil"} },
		"header comma":   func(e *model.ExternalAuth) { e.ResponseHeaders = []string{"X-A,X-B"} },
		"header framing": func(e *model.ExternalAuth) { e.ResponseHeaders = []string{"X-A", "transfer-encoding"} },
		"header host":    func(e *model.ExternalAuth) { e.ResponseHeaders = []string{"Host"} },
		"signin evil":    func(e *model.ExternalAuth) { e.SigninURL = "https://login.test/' if TRUE" },
		"signin scheme":  func(e *model.ExternalAuth) { e.SigninURL = "javascript:alert(1)" },
		"17 headers": func(e *model.ExternalAuth) {
			for i := 0; i < 17; i++ {
				e.ResponseHeaders = append(e.ResponseHeaders, "X-"+strings.Repeat("a", i+1))
			}
		},
	} {
		e := good
		mutate(&e)
		lb := newLB([]model.Listener{httpListener("", routes(toPool(app, hostIs("a.example"), pathPrefix("/"))))}, app, auth)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{ExternalAuth: &e}
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// startAuthServer decides per request by the original URI HAProxy sends
// (X-Original-URI): /deny gets 401, /forbid 403, /broken 404 (an error),
// anything else 200 with X-Auth-Request-User: alice (and X-Auth-Request-
// Email only for /mail) when the client's cookie session=ok came along,
// else 401. It records the method and Host of the last request.
func startAuthServer(t *testing.T) (addr string, last func() (method, host, uri string), stop func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var m, h, u string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uri := r.Header.Get("X-Original-URI")
		m, h, u = r.Method, r.Host, r.URL.RequestURI()
		switch {
		case strings.HasPrefix(uri, "/deny"):
			w.WriteHeader(401)
		case strings.HasPrefix(uri, "/forbid"):
			w.WriteHeader(403)
		case strings.HasPrefix(uri, "/broken"):
			w.WriteHeader(404)
		case !strings.Contains(r.Header.Get("Cookie"), "session=ok"):
			w.WriteHeader(401)
		default:
			w.Header().Set("X-Auth-Request-User", "alice")
			w.Header().Add("Set-Cookie", "session=ok; Path=/; HttpOnly")
			w.Header().Add("Set-Cookie", "csrf=1; Path=/")
			if strings.HasPrefix(uri, "/mail") {
				w.Header().Set("X-Auth-Request-Email", "alice@example.com")
			}
			w.WriteHeader(200)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), func() (string, string, string) { return m, h, u }, func() { srv.Close() }
}

// startHeaderBackend answers 200 with the X-Auth-Request-User and -Email
// headers it received as X-Seen-User and X-Seen-Email.
func startHeaderBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-User", strings.Join(r.Header.Values("X-Auth-Request-User"), "|"))
		w.Header().Set("X-Seen-Email", strings.Join(r.Header.Values("X-Auth-Request-Email"), "|"))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestIntegrationExtAuth runs auth-url through a real HAProxy and pier's
// Lua action against a real auth server deciding per request: 2xx lets
// the request through with the listed headers copied from the auth
// answer (a client's own X-Auth-Request-* removed when the answer lacks
// them), 401 redirects to auth-signin with rd= the original URL (401
// where no sign-in is set), 403 is 403, another status is 500, and an
// auth server that is down gives 500. Another Ingress's route of the
// same host and pool is never asked about.
func TestIntegrationExtAuth(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	authAddr, last, stopAuth := startAuthServer(t)
	app := pool("app", memberAt(startHeaderBackend(t, "app")))
	other := pool("other", memberAt(startHeaderBackend(t, "other")))
	auth := pool("oauth2-proxy", memberAt(authAddr))
	auth.HealthCheck = false
	addr := serveLB(t, bin, extAuthFixture(app, other, auth))
	get := func(host, uri, headers string) *http.Response {
		return rawRequest(t, addr, "127.0.0.1", "GET "+uri+" HTTP/1.1\r\nHost: "+host+"\r\n"+headers+"\r\n")
	}
	ok := "Cookie: session=ok\r\nX-Auth-Request-Email: forged@evil\r\n"
	resp := get("app.test", "/mail/x?q=1", ok)
	if resp.StatusCode != 200 || resp.Header.Get("X-Seen-User") != "alice" || resp.Header.Get("X-Seen-Email") != "alice@example.com" {
		t.Errorf("/mail: %d user %q email %q", resp.StatusCode, resp.Header.Get("X-Seen-User"), resp.Header.Get("X-Seen-Email"))
	}
	if got := resp.Header.Values("Set-Cookie"); len(got) != 2 || got[0] != "session=ok; Path=/; HttpOnly" || got[1] != "csrf=1; Path=/" {
		t.Errorf("/mail: Set-Cookie %q, want the auth answer's two cookies", got)
	}
	if m, h, u := last(); m != "GET" || h != "oauth2-proxy.ns.svc" || u != "/oauth2/auth" {
		t.Errorf("auth request %s %s %s, want GET oauth2-proxy.ns.svc /oauth2/auth", m, h, u)
	}
	resp = get("app.test", "/x", ok)
	if resp.StatusCode != 200 || resp.Header.Get("X-Seen-User") != "alice" || resp.Header.Get("X-Seen-Email") != "" {
		t.Errorf("/x: %d user %q email %q (a forged header must not pass)", resp.StatusCode,
			resp.Header.Get("X-Seen-User"), resp.Header.Get("X-Seen-Email"))
	}
	resp = get("app.test", "/x?a=b&c=/d", "")
	want := "https://login.test/oauth2/start?rd=" + url.QueryEscape("http://app.test/x?a=b&c=/d")
	if resp.StatusCode != 302 || !strings.EqualFold(resp.Header.Get("Location"), want) {
		t.Errorf("no session: %d to %q, want 302 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	for _, tc := range []struct {
		host, uri string
		code      int
	}{
		{"app.test", "/forbid", 403},
		{"app.test", "/broken", 500},
		{"api.test", "/deny", 401},
		{"api.test", "/x", 200},
		{"app.test", "/public/deny", 200}, // 401 if auth were asked
		{"other.test", "/deny", 200},
	} {
		if resp := get(tc.host, tc.uri, ok); resp.StatusCode != tc.code {
			t.Errorf("%s%s: %d, want %d", tc.host, tc.uri, resp.StatusCode, tc.code)
		}
	}
	if m, _, _ := last(); m != "HEAD" {
		_, h, u := last()
		t.Errorf("api.test asked with %s %s %s, want HEAD", m, h, u)
	}
	stopAuth()
	if resp := get("app.test", "/x", ok); resp.StatusCode != 500 {
		t.Errorf("auth server down: %d, want 500", resp.StatusCode)
	}
}

// TestExtAuthPacked: two load balancers with auth-url packed in one
// HAProxy process (a shard) each load their own Lua file and register
// their own action, and their internal frontends bind distinct sockets:
// `haproxy -c -dW` accepts the two fragments together.
func TestExtAuthPacked(t *testing.T) {
	bin := haproxyBin(t)
	dir := t.TempDir()
	var fragments []string
	for i, uuid := range []string{fixtureUUID, "6a1d0f7e-2b3c-4d5e-8f90-123456789abc"} {
		lb := extAuthFixture(pool("app", member("10.0.0.1", 80)), pool("other", member("10.0.0.2", 80)),
			pool("oauth2-proxy", member("10.0.0.9", 4180)))
		lb.UUID = uuid
		lb.Listeners[0].Port = 8080 + i
		at := layout.LB{UUID: uuid, Dir: filepath.Join(dir, uuid)}
		r, err := Render(lb, at, nil, fixtureOptions())
		if err != nil {
			t.Fatal(err)
		}
		writeMaps(t, r.Maps, "")
		writeFile(t, r.AuthLuaPath, r.AuthLua)
		writeFile(t, at.Config(), r.Fragment)
		fragments = append(fragments, at.Config())
	}
	checkFiles(t, bin, dir, fragments...)
}

// TestIntegrationExtAuthSlow: the auth request is bounded by the auth
// pool backend's timeout server (the Service port's, as for any route):
// an answer within it lets the request through, a slower one gives 500
// once it expires.
func TestIntegrationExtAuthSlow(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, err := time.ParseDuration(strings.TrimPrefix(r.Header.Get("X-Original-URI"), "/sleep/")); err == nil {
			time.Sleep(d)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	app := pool("app", memberAt(startHeaderBackend(t, "app")))
	auth := pool("oauth2-proxy", memberAt(l.Addr().String()))
	auth.HealthCheck, auth.ServerTimeout = false, 2*time.Second
	addr := serveLB(t, bin, extAuthFixture(app, pool("other", member("10.0.0.2", 80)), auth))
	for _, tc := range []struct {
		sleep    string
		code     int
		min, max time.Duration
	}{
		{"1s", 200, time.Second, 1800 * time.Millisecond},
		{"5s", 500, 2 * time.Second, 3500 * time.Millisecond},
	} {
		start := time.Now()
		resp := rawRequest(t, addr, "127.0.0.1", "GET /sleep/"+tc.sleep+" HTTP/1.1\r\nHost: app.test\r\n\r\n")
		took := time.Since(start)
		t.Logf("auth answering in %s: %d after %s", tc.sleep, resp.StatusCode, took.Round(time.Millisecond))
		if resp.StatusCode != tc.code || took < tc.min || took > tc.max {
			t.Errorf("auth answering in %s: %d after %s, want %d within %s-%s", tc.sleep, resp.StatusCode, took, tc.code, tc.min, tc.max)
		}
	}
}
