package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// gatewayCORSFixture: what a Gateway API CORS filter becomes: exact
// origins with exposeHeaders and no allowHeaders (no
// Access-Control-Allow-Headers), and "*" with the safelisted methods.
func gatewayCORSFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("api.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"https://app.example", "http://a.example:8080", "https://*.example.org"}, AllowMethods: []string{"GET", "PUT"},
			ExposeHeaders: []string{"X-Request-Id", "X-Trace"}, AllowCredentials: true, MaxAgeSeconds: 5}}),
		with(toPool(web1, hostIs("cred.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"http://*", "https://*"}, AllowMethods: []string{"GET"}, AllowCredentials: true, MaxAgeSeconds: 5}}),
		with(toPool(web2, hostIs("any.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"*"}, AllowMethods: []string{"GET", "HEAD", "POST"}, MaxAgeSeconds: 5}}),
		with(toPool(web2, hostIs("echo.example"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"http://*", "https://*"}, AllowMethods: []string{"GET", "PUT"}, EchoRequestMethod: true,
			EchoRequestHeaders: true, ExposeHeaders: []string{"X-Trace"}, AllowCredentials: true, MaxAgeSeconds: 5,
			RefuseOtherPreflights: true}}),
	))}, web1, web2)
}

// TestIntegrationGatewayCORS: a Gateway API CORS filter's options through
// a real HAProxy: the preflight is answered 204 without
// Access-Control-Allow-Headers when none are allowed, and the answer to
// an allowed origin exposes the listed headers; another origin gets no
// CORS header.
func TestIntegrationGatewayCORS(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	lb := newLB([]model.Listener{httpListener("", routes(
		with(toPool(fast, hostIs("api.test"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"https://app.test"}, AllowMethods: []string{"GET", "PUT"},
			ExposeHeaders: []string{"X-Backend", "X-Seen-Host"}, AllowCredentials: true, MaxAgeSeconds: 5}}),
		with(toPool(fast, hostIs("wild.test"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"https://*.app.test", "http://*"}, AllowMethods: []string{"GET"}, AllowCredentials: true, MaxAgeSeconds: 5}}),
		with(toPool(fast, hostIs("echo.test"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"https://*"}, AllowMethods: []string{"GET", "HEAD", "POST"}, EchoRequestMethod: true,
			EchoRequestHeaders: true, ExposeHeaders: []string{"X-Backend"}, AllowCredentials: true, MaxAgeSeconds: 5,
			RefuseOtherPreflights: true}}),
	))}, fast)
	addr := serveLB(t, bin, lb)
	pre := rawRequest(t, addr, "127.0.0.1", "OPTIONS /x HTTP/1.1\r\nHost: api.test\r\nOrigin: https://app.test\r\nAccess-Control-Request-Method: PUT\r\n\r\n")
	h := pre.Header
	if pre.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "https://app.test" || h.Get("Access-Control-Allow-Methods") != "GET, PUT" ||
		h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Max-Age") != "5" || len(h.Values("Access-Control-Allow-Headers")) != 0 ||
		h.Get("Access-Control-Expose-Headers") != "X-Backend, X-Seen-Host" {
		t.Errorf("preflight: %d %v", pre.StatusCode, h)
	}
	// "*" methods and headers: the preflight gets what it asks for when
	// well-formed; else the list, and no Allow-Headers.
	for _, tc := range []struct{ ask, methods, headers string }{
		{"Access-Control-Request-Method: PUT\r\nAccess-Control-Request-Headers: x-header-1, X-Header-2\r\n", "PUT", "x-header-1, X-Header-2"},
		{"Access-Control-Request-Method: DELETE\r\n", "DELETE", ""},
		{"Access-Control-Request-Method: p;ut\r\nAccess-Control-Request-Headers: x;evil\r\n", "GET, HEAD, POST", ""},
		{"", "GET, HEAD, POST", ""},
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "OPTIONS /x HTTP/1.1\r\nHost: echo.test\r\nOrigin: https://b.test\r\n"+tc.ask+"\r\n")
		h := resp.Header
		if resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "https://b.test" || h.Get("Access-Control-Allow-Methods") != tc.methods ||
			h.Get("Access-Control-Allow-Headers") != tc.headers || len(h.Values("Access-Control-Allow-Headers")) > 1 ||
			h.Get("Access-Control-Allow-Credentials") != "true" || h.Get("Access-Control-Expose-Headers") != "X-Backend" {
			t.Errorf("echo preflight %q: %d %v", tc.ask, resp.StatusCode, h)
		}
	}
	// RefuseOtherPreflights: a preflight from another origin is 403
	// without CORS headers; without it (api.test) it reaches the pool.
	for host, want := range map[string]int{"echo.test": 403, "api.test": 200} {
		resp := rawRequest(t, addr, "127.0.0.1", "OPTIONS /x HTTP/1.1\r\nHost: "+host+
			"\r\nOrigin: http://evil.test\r\nAccess-Control-Request-Method: PUT\r\n\r\n")
		if resp.StatusCode != want || resp.Header.Get("Access-Control-Allow-Origin") != "" || resp.Header.Get("Access-Control-Allow-Methods") != "" {
			t.Errorf("%s, preflight from another origin: %d %v, want %d", host, resp.StatusCode, resp.Header, want)
		}
	}
	plain := rawRequest(t, addr, "127.0.0.1", "OPTIONS /x HTTP/1.1\r\nHost: echo.test\r\nOrigin: http://evil.test\r\n\r\n")
	if plain.StatusCode != 200 || plain.Header.Get("X-Backend") != "fast" {
		t.Errorf("OPTIONS without Access-Control-Request-Method: %d %v", plain.StatusCode, plain.Header)
	}
	get := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: api.test\r\nOrigin: https://app.test\r\n\r\n")
	if h := get.Header; get.StatusCode != 200 || h.Get("X-Backend") != "fast" || h.Get("Access-Control-Allow-Origin") != "https://app.test" ||
		h.Get("Access-Control-Expose-Headers") != "X-Backend, X-Seen-Host" {
		t.Errorf("GET, allowed: %d %v", get.StatusCode, h)
	}
	for origin, echoed := range map[string]bool{
		"https://a.app.test": true, "https://a.b.app.test": true, "http://anything.test:8080": true,
		"https://app.test": false, "https://a.app.test:8443": false, "https://a.app.test.evil": false, "https://evil.test": false,
	} {
		resp := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: wild.test\r\nOrigin: "+origin+"\r\n\r\n")
		want := ""
		if echoed {
			want = origin
		}
		if got := resp.Header.Get("Access-Control-Allow-Origin"); got != want || (echoed && resp.Header.Get("Access-Control-Allow-Credentials") != "true") {
			t.Errorf("wildcard, Origin %s: Access-Control-Allow-Origin %q, want %q (%v)", origin, got, want, resp.Header)
		}
	}
	other := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: api.test\r\nOrigin: https://evil.test\r\n\r\n")
	if h := other.Header; other.StatusCode != 200 || h.Get("Access-Control-Allow-Origin") != "" || h.Get("Access-Control-Expose-Headers") != "" {
		t.Errorf("GET, other origin: %d %v", other.StatusCode, h)
	}
}

func TestCORSExposeRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	for _, bad := range []string{"https://*.a.example;evil", "https://a*.example", "https://*.a.example'"} {
		p := toPool(web, hostIs("a.example"), pathPrefix("/"))
		p.Options = &model.PolicyOptions{CORS: &model.CORS{AllowOrigins: []string{bad}, AllowMethods: []string{"GET"}, MaxAgeSeconds: 5}}
		lb := newLB([]model.Listener{httpListener("", routes(p))}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("origin %q rendered", bad)
		}
	}
	for _, expose := range [][]string{{"X-A;evil"}, {"X A"}, {"*"}, {"X-A'"}} {
		p := toPool(web, hostIs("a.example"), pathPrefix("/"))
		p.Options = &model.PolicyOptions{CORS: &model.CORS{AllowOrigins: []string{"*"}, AllowMethods: []string{"GET"},
			ExposeHeaders: expose, MaxAgeSeconds: 5}}
		lb := newLB([]model.Listener{httpListener("", routes(p))}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("expose %q rendered", expose)
		}
	}
}
