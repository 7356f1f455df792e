package render

import (
	"strconv"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// serveLB renders lb on a free loopback port, starts HAProxy on it and
// returns the address.
func serveLB(t *testing.T, bin string, lb *model.LoadBalancer) string {
	t.Helper()
	return serveLBWith(t, bin, lb, Options{MinSlots: 4, Users: fixtureUsers})
}

// serveLBWith is serveLB with other options (opts.Dir is set here).
func serveLBWith(t *testing.T, bin string, lb *model.LoadBalancer, opts Options) string {
	t.Helper()
	port := freePort()
	lb.Listeners[0].Port, lb.VIP, lb.FIP = port, "127.0.0.1", ""
	dir := t.TempDir()
	opts.Dir = dir
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := Maps(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		writeFile(t, m.Path, m.Data)
	}
	r, err := Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.AuthLua != nil {
		writeFile(t, r.AuthLuaPath, r.AuthLua)
	}
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", port)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// TestIntegrationCORS: enable-cors through a real HAProxy. A preflight
// from an allowed origin is answered 204 by HAProxy with the headers, a
// GET from it reaches the backend and gets the origin echoed; another
// origin is never echoed (its preflight goes to the backend, as in
// ingress-nginx), nor is an allowed origin hidden behind a second Origin
// line. With "*", any preflight gets 204 and "*".
func TestIntegrationCORS(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	lb := newLB([]model.Listener{httpListener("", routes(
		with(toPool(fast, hostIs("api.test"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"http://localhost:3000", "https://app.test"}, AllowMethods: []string{"GET", "POST"},
			AllowHeaders: []string{"Content-Type", "X-Token"}, AllowCredentials: true, MaxAgeSeconds: 600}}),
		with(toPool(fast, hostIs("any.test"), pathPrefix("/")), model.PolicyOptions{CORS: &model.CORS{
			AllowOrigins: []string{"*"}, AllowMethods: []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"},
			AllowHeaders: []string{"DNT", "Content-Type"}, MaxAgeSeconds: 1728000}}),
		toPool(fast, hostIs("plain.test"), pathPrefix("/")),
	))}, fast)
	addr := serveLB(t, bin, lb)

	for _, tc := range []struct {
		name, host, method, origins string
		status                      int
		backend                     string // "" when HAProxy answers
		allowOrigin, methods        string
		credentials, maxAge         string
	}{
		{"preflight, allowed", "api.test", "OPTIONS", "Origin: https://app.test\r\n", 204, "",
			"https://app.test", "GET, POST", "true", "600"},
		{"preflight, other allowed", "api.test", "OPTIONS", "Origin: http://localhost:3000\r\n", 204, "",
			"http://localhost:3000", "GET, POST", "true", "600"},
		{"preflight, disallowed", "api.test", "OPTIONS", "Origin: https://evil.test\r\n", 200, "fast", "", "", "", ""},
		{"preflight, case differs", "api.test", "OPTIONS", "Origin: https://APP.test\r\n", 200, "fast", "", "", "", ""},
		{"preflight, two origins", "api.test", "OPTIONS", "Origin: https://app.test\r\nOrigin: https://evil.test\r\n", 200, "fast", "", "", "", ""},
		{"preflight, list in one line", "api.test", "OPTIONS", "Origin: https://app.test, https://evil.test\r\n", 200, "fast", "", "", "", ""},
		{"GET, allowed", "api.test", "GET", "Origin: https://app.test\r\n", 200, "fast", "https://app.test", "", "true", ""},
		{"GET, disallowed", "api.test", "GET", "Origin: https://evil.test\r\n", 200, "fast", "", "", "", ""},
		{"GET, no origin", "api.test", "GET", "", 200, "fast", "", "", "", ""},
		{"preflight, any", "any.test", "OPTIONS", "Origin: https://whoever.test\r\n", 204, "",
			"*", "GET, PUT, POST, DELETE, PATCH, OPTIONS", "", "1728000"},
		{"GET, any", "any.test", "GET", "Origin: https://whoever.test\r\n", 200, "fast", "*", "", "", ""},
		{"no CORS", "plain.test", "OPTIONS", "Origin: https://app.test\r\n", 200, "fast", "", "", "", ""},
	} {
		req := tc.method + " /x HTTP/1.1\r\nHost: " + tc.host + "\r\nAccess-Control-Request-Method: POST\r\n" + tc.origins + "\r\n"
		resp := rawRequest(t, addr, "127.0.0.1", req)
		h := resp.Header
		if resp.StatusCode != tc.status || h.Get("X-Backend") != tc.backend ||
			h.Get("Access-Control-Allow-Origin") != tc.allowOrigin || len(h.Values("Access-Control-Allow-Origin")) > 1 ||
			h.Get("Access-Control-Allow-Methods") != tc.methods ||
			h.Get("Access-Control-Allow-Credentials") != tc.credentials || h.Get("Access-Control-Max-Age") != tc.maxAge {
			t.Errorf("%s: %d from %q, headers %v", tc.name, resp.StatusCode, h.Get("X-Backend"), h)
		}
		if tc.status == 204 && h.Get("Access-Control-Allow-Headers") == "" {
			t.Errorf("%s: no Access-Control-Allow-Headers", tc.name)
		}
	}
}
