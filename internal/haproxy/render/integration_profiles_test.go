package render

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestIntegrationAnnotations runs the ingress-nginx options
// through a real HAProxy, as a user would check them with curl: 308 to
// https, 301/307 with the exact Location, 403 by client source (a second
// loopback address as source), 413 for a large body with Content-Length
// and chunked, and 504 from a slow backend past its read timeout. A
// policy without options shares a pool with one that has them and is
// untouched by them.
func TestIntegrationAnnotations(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	fast := pool("fast", memberAt(startBackend(t, "fast")))
	slow := pool("slow", memberAt(startSlowBackend(t, "slow", 1500*time.Millisecond)))
	slowPatient := pool("slow-patient", memberAt(startSlowBackend(t, "slow-patient", 1500*time.Millisecond)))
	slow.ServerTimeout = 500 * time.Millisecond
	slowPatient.ServerTimeout, slowPatient.ConnectTimeout = 5*time.Second, time.Second
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	lb := newLB([]model.Listener{httpListener("", routes(
		with(toPool(fast, hostIs("secure.test"), pathPrefix("/")), model.PolicyOptions{HTTPSRedirect: true}),
		with(toPool(fast, hostIs("moved.test"), pathPrefix("/")),
			model.PolicyOptions{RedirectURL: "https://new.example/a%20b?x=1&y=$HOME", RedirectCode: 301}),
		with(toPool(fast, hostIs("temp.test"), pathPrefix("/")),
			model.PolicyOptions{RedirectURL: "http://other.example/", RedirectCode: 307}),
		with(toPool(fast, hostIs("allow.test"), pathPrefix("/")), model.PolicyOptions{AllowSources: []string{"127.0.0.1/32"}}),
		with(toPool(fast, hostIs("approot.test"), pathPrefix("/")), model.PolicyOptions{AppRoot: "/app1"}),
		with(toPool(fast, hostIs("vhost.test"), pathPrefix("/")), model.PolicyOptions{UpstreamHost: "internal.example"}),
		with(toPool(fast, hostIs("www.canonical.test"), pathPrefix("/")),
			model.PolicyOptions{RedirectPrefix: "http://canonical.test", RedirectCode: 308}),
		with(toPool(fast, hostIs("deny.test"), pathPrefix("/")), model.PolicyOptions{DenySources: []string{"127.0.0.2/32"}}),
		with(toPool(fast, hostIs("body.test"), pathPrefix("/")), model.PolicyOptions{MaxBodyBytes: 1000}),
		toPool(slow, hostIs("slow.test"), pathPrefix("/")),
		toPool(slowPatient, hostIs("patient.test"), pathPrefix("/")),
		toPool(fast, hostIs("plain.test"), pathPrefix("/")),
	))}, fast, slow, slowPatient)
	addr := serveLB(t, bin, lb)

	for _, tc := range []struct {
		name, from, host, path string
		status                 int
		location, backend      string
	}{
		{"ssl-redirect", "127.0.0.1", "secure.test", "/a/b?q=1", 308, "https://secure.test/a/b?q=1", ""},
		{"ssl-redirect, port in Host", "127.0.0.1", "secure.test:80", "/", 308, "https://secure.test/", ""},
		{"permanent-redirect", "127.0.0.1", "moved.test", "/x", 301, "https://new.example/a%20b?x=1&y=$HOME", ""},
		{"temporal-redirect", "127.0.0.1", "temp.test", "/x", 307, "http://other.example/", ""},
		{"app-root, /", "127.0.0.1", "approot.test", "/", 302, "/app1", ""},
		{"app-root, other path", "127.0.0.1", "approot.test", "/other", 200, "", "fast"},
		{"from-to-www-redirect", "127.0.0.1", "www.canonical.test", "/a/b?c=d", 308, "http://canonical.test/a/b?c=d", ""},
		{"allow-list, allowed source", "127.0.0.1", "allow.test", "/", 200, "", "fast"},
		{"allow-list, other source", "127.0.0.2", "allow.test", "/", 403, "", ""},
		{"deny-list, denied source", "127.0.0.2", "deny.test", "/", 403, "", ""},
		{"deny-list, other source", "127.0.0.1", "deny.test", "/", 200, "", "fast"},
		{"no options, same pool, denied source of another Ingress", "127.0.0.2", "plain.test", "/", 200, "", "fast"},
		{"no options, same pool", "127.0.0.1", "plain.test", "/", 200, "", "fast"},
	} {
		resp := rawRequest(t, addr, tc.from, "GET "+tc.path+" HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
		if resp.StatusCode != tc.status || resp.Header.Get("Location") != tc.location || resp.Header.Get("X-Backend") != tc.backend {
			t.Errorf("%s: %d Location %q backend %q, want %d %q %q", tc.name, resp.StatusCode,
				resp.Header.Get("Location"), resp.Header.Get("X-Backend"), tc.status, tc.location, tc.backend)
		}
	}
	// upstream-vhost: routed by the client's Host, the backend sees ours.
	if resp := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: vhost.test\r\n\r\n"); resp.StatusCode != 200 ||
		resp.Header.Get("X-Seen-Host") != "internal.example" {
		t.Errorf("upstream-vhost: %d, backend saw Host %q", resp.StatusCode, resp.Header.Get("X-Seen-Host"))
	}
	checkBodyLimit(t, addr)
	checkReadTimeout(t, addr)
}

// checkBodyLimit: 1000 bytes pass, 1001 get 413, by Content-Length and
// chunked alike.
func checkBodyLimit(t *testing.T, addr string) {
	for _, tc := range []struct {
		size    int
		chunked bool
		status  int
	}{{1000, false, 200}, {1001, false, 413}, {1000, true, 200}, {1001, true, 413}, {8000, true, 413}, {0, false, 200}} {
		body := strings.Repeat("a", tc.size)
		head := "POST / HTTP/1.1\r\nHost: body.test\r\n"
		if tc.chunked {
			head += "Transfer-Encoding: chunked\r\n\r\n" + strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
		} else {
			head += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		}
		if resp := rawRequest(t, addr, "127.0.0.1", head); resp.StatusCode != tc.status {
			t.Errorf("body of %d bytes (chunked %v): status %d, want %d", tc.size, tc.chunked, resp.StatusCode, tc.status)
		}
	}
}

// checkReadTimeout: a backend answering after 1.5 s gets 504 after the
// pool's 500 ms read timeout, and 200 where the pool allows 5 s.
func checkReadTimeout(t *testing.T, addr string) {
	start := time.Now()
	resp := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: slow.test\r\n\r\n")
	took := time.Since(start)
	if resp.StatusCode != 504 || took < 400*time.Millisecond || took > 1400*time.Millisecond {
		t.Errorf("slow backend, 500ms read timeout: %d after %v, want 504 after about 500ms", resp.StatusCode, took)
	}
	resp = rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: patient.test\r\n\r\n")
	if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "slow-patient" {
		t.Errorf("slow backend, 5s read timeout: %d from %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
}

// rawRequest sends one request from the local address from and reads
// the answer.
func rawRequest(t *testing.T, addr, from, req string) *http.Response {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%q: %v", req[:min(len(req), 60)], err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// startSlowBackend answers after delay.
func startSlowBackend(t *testing.T, name string, delay time.Duration) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("X-Backend", name)
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// TestProfilesAreRevalidated: the agent renders what the store holds,
// which anyone with RBAC on it can edit, so every option is checked again.
func TestProfilesAreRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	for name, o := range map[string]model.PolicyOptions{
		"newline in URL":     {RedirectURL: "https://a.example/\nhttp-request deny", RedirectCode: 301},
		"quote in URL":       {RedirectURL: "https://a.example/'x", RedirectCode: 301},
		"non-canonical URL":  {RedirectURL: "HTTPS://a.example", RedirectCode: 301},
		"javascript URL":     {RedirectURL: "javascript:alert(1)", RedirectCode: 301},
		"redirect code":      {RedirectURL: "https://a.example", RedirectCode: 200},
		"missing code":       {RedirectURL: "https://a.example"},
		"code alone":         {RedirectCode: 301},
		"prefix with path":   {RedirectPrefix: "https://a.example/x", RedirectCode: 308},
		"prefix and URL":     {RedirectPrefix: "https://a.example", RedirectURL: "https://a.example", RedirectCode: 308},
		"CIDR with suffix":   {AllowSources: []string{"10.0.0.0/8;evil"}},
		"unmasked CIDR":      {DenySources: []string{"10.1.2.3/8"}},
		"space in CIDR":      {DenySources: []string{"10.0.0.0/8 20.0.0.0/8"}},
		"negative body size": {MaxBodyBytes: -1},
		"huge body size":     {MaxBodyBytes: 1<<40 + 1},
		"app root /":         {AppRoot: "/"},
		"app root relative":  {AppRoot: "app"},
		"app root newline":   {AppRoot: "/a\nb"},
		"upstream host caps": {UpstreamHost: "A.example"},
		"upstream host port": {UpstreamHost: "a.example:80"},
		"rewrite evil":       {RewritePath: "/a;evil"},
		"rewrite newline":    {RewritePath: "/a\nhttp-request deny"},
		"rewrite quote":      {RewritePath: "/a'b"},
		"rewrite space":      {RewritePath: "/a b"},
		"rewrite relative":   {RewritePath: "a"},
		"rewrite percent":    {RewritePath: "/a%[src]"},
		"rewrite dollar":     {RewritePath: "/$1"},
		"rewrite query":      {RewritePath: "/a?b=1"},
		"rewrite dot seg":    {RewritePath: "/a/../b"},
		"rewrite backslash":  {RewritePath: "/a\\b"},
		"prefix evil":        {ForwardedPrefix: "/a;evil"},
		"prefix percent":     {ForwardedPrefix: "/a%[src]"},
		"prefix relative":    {ForwardedPrefix: "a"},
		"prefix newline":     {ForwardedPrefix: "/a\nhttp-request deny"},
		"cors no origins":    {CORS: &model.CORS{AllowMethods: []string{"GET"}, AllowHeaders: []string{"A"}}},
		"cors origin path":   {CORS: corsWith("https://a.example/x", "GET", "A")},
		"cors origin quote":  {CORS: corsWith("https://a.example'", "GET", "A")},
		"cors origin caps":   {CORS: corsWith("https://A.example", "GET", "A")},
		"cors origin star2":  {CORS: &model.CORS{AllowOrigins: []string{"*", "https://a.example"}, AllowMethods: []string{"GET"}, AllowHeaders: []string{"A"}}},
		"cors method space":  {CORS: corsWith("*", "GET POST", "A")},
		"cors method lower":  {CORS: corsWith("*", "get", "A")},
		"cors header evil":   {CORS: corsWith("*", "GET", "A;evil")},
		"cors header %":      {CORS: corsWith("*", "GET", "A%[src]")},
		"cors no methods":    {CORS: &model.CORS{AllowOrigins: []string{"*"}, AllowHeaders: []string{"A"}}},
		"cors max age":       {CORS: &model.CORS{AllowOrigins: []string{"*"}, AllowMethods: []string{"GET"}, AllowHeaders: []string{"A"}, MaxAgeSeconds: -1}},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(web, hostIs("a.example"), pathPrefix("/"))))}, web)
		lb.Listeners[0].Policies[0].Options = &o
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	lb := newLB([]model.Listener{{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
		Certificates: []model.Certificate{{ID: model.ID("c"), Hosts: []string{"a.example"}, SHA256: "1"}},
		Policies:     routes(toPool(web, hostIs("a.example"), pathPrefix("/")))}}, web)
	lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{HTTPSRedirect: true}
	if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
		t.Error("https redirect on a TLS listener rendered")
	}
	rej := newLB([]model.Listener{httpListener("", routes(reject(pathPrefix("/"))))}, web)
	rej.Listeners[0].Policies[0].Options = &model.PolicyOptions{MaxBodyBytes: 1}
	if _, err := Render(rej, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
		t.Error("REJECT policy with options rendered")
	}
	for _, d := range []time.Duration{-time.Second, 25 * time.Hour, time.Microsecond} {
		bad := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
		bad.Pools[0].ServerTimeout = d
		if _, err := Render(bad, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("pool timeout %v rendered", d)
		}
	}
}

func corsWith(origin, method, header string) *model.CORS {
	return &model.CORS{AllowOrigins: []string{origin}, AllowMethods: []string{method}, AllowHeaders: []string{header}}
}
