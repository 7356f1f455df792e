package render

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// customErrorsFixture: custom-http-errors 404,503 on app.test to the
// error pool, beside a route of another Ingress on the same pool without
// it, and dead.test (502,503,504) to a pool whose member refuses
// connections.
func customErrorsFixture(app, errs model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	dead := pool("dead", member("127.0.0.1", 1))
	dead.HealthCheck = false
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(app, hostIs("app.test"), pathPrefix("/")), model.PolicyOptions{CustomErrors: &model.CustomErrors{
			PoolID: errs.ID, Codes: []int{503, 404}, Namespace: "shop", Ingress: "web", Service: "app", ServicePort: "8080"}}),
		toPool(app, hostIs("plain.test"), pathPrefix("/")),
		with(toPool(dead, hostIs("dead.test"), pathPrefix("/")), model.PolicyOptions{CustomErrors: &model.CustomErrors{
			PoolID: errs.ID, Codes: []int{502, 503, 504}, Namespace: "shop", Ingress: "dead", Service: "dead", ServicePort: "8080"}}),
	))}, app, errs, dead)
}

func TestCustomErrorsRevalidated(t *testing.T) {
	app, errs := pool("app", member("10.0.0.1", 80)), pool("errors", member("10.0.0.2", 80))
	good := model.CustomErrors{PoolID: errs.ID, Codes: []int{404}, Namespace: "shop", Ingress: "web", Service: "app", ServicePort: "http"}
	for name, mutate := range map[string]func(e *model.CustomErrors){
		"missing pool": func(e *model.CustomErrors) { e.PoolID = model.ID("nope") },
		"no codes":     func(e *model.CustomErrors) { e.Codes = nil },
		"code 200":     func(e *model.CustomErrors) { e.Codes = []int{200} },
		"code 600":     func(e *model.CustomErrors) { e.Codes = []int{600} },
		"code twice":   func(e *model.CustomErrors) { e.Codes = []int{404, 404} },
		"33 codes": func(e *model.CustomErrors) {
			e.Codes = nil
			for i := 0; i < 33; i++ {
				e.Codes = append(e.Codes, 400+i)
			}
		},
		"namespace evil": func(e *model.CustomErrors) { e.Namespace = "shop;evil" },
		"ingress quote":  func(e *model.CustomErrors) { e.Ingress = "web' if TRUE" },
		"service empty":  func(e *model.CustomErrors) { e.Service = "" },
		"port format":    func(e *model.CustomErrors) { e.ServicePort = "%[src]" },
	} {
		e := good
		mutate(&e)
		lb := newLB([]model.Listener{httpListener("", routes(toPool(app, hostIs("a.example"), pathPrefix("/"))))}, app, errs)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{CustomErrors: &e}
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// startStatusBackend answers /status/<code> with that code, a body
// "app <code>" and Content-Type text/plain; anything else 200 "app ok".
func startStatusBackend(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		code, ok := strings.CutPrefix(r.URL.Path, "/status/")
		if !ok {
			io.WriteString(w, "app ok")
			return
		}
		n, err := strconv.Atoi(code)
		if err != nil || n < 200 || n > 599 {
			n = 400
		}
		w.WriteHeader(n)
		io.WriteString(w, "app "+code)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// startErrorPages answers every request 200 with an HTML page naming the
// X-Code it got, and records the headers of the last request.
func startErrorPages(t *testing.T) (addr string, last func() http.Header, stop func()) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen http.Header
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Clone()
		seen.Set("X-Test-Path", r.URL.RequestURI())
		seen.Set("X-Test-Method", r.Method)
		seen.Set("X-Test-Host", r.Host)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("X-Error-Page", "yes")
		if _, size, ok := strings.Cut(r.Header.Get("X-Original-URI"), "?size="); ok {
			n, _ := strconv.Atoi(size)
			io.WriteString(w, strings.Repeat("x", n))
			return
		}
		io.WriteString(w, "<p>error page "+r.Header.Get("X-Code")+"</p>")
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String(), func() http.Header {
		mu.Lock()
		defer mu.Unlock()
		return seen
	}, func() { srv.Close() }
}

// TestIntegrationCustomErrors runs custom-http-errors through a real
// HAProxy and pier's Lua action: a listed status from the backend (404)
// reaches the client with the same status and the error backend's body
// and Content-Type, the error backend having got GET / with X-Code,
// X-Format, X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name,
// X-Service-Port and X-Request-ID; a 200 and an unlisted status (410)
// pass untouched, as does a 404 of another Ingress's route to the same
// pool; a page over 12 KiB, or the error backend down, leaves the
// original answer.
func TestIntegrationCustomErrors(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	pagesAddr, last, stopPages := startErrorPages(t)
	app := pool("app", memberAt(startStatusBackend(t)))
	errs := pool("error-pages", memberAt(pagesAddr))
	errs.HealthCheck = false
	addr := serveLB(t, bin, customErrorsFixture(app, errs))
	get := func(host, uri string, hdr map[string]string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest("GET", "http://"+addr+uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		// A bound, so that a stuck Lua action fails the test with its
		// request instead of hanging the package until go test's timeout.
		resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	code, ct, body := get("app.test", "/status/404?q=1", map[string]string{"Accept": "application/json", "X-Request-ID": "req-42"})
	if code != 404 || ct != "text/html; charset=utf-8" || body != "<p>error page 404</p>" {
		t.Errorf("404: %d %q %q, want 404 with the error page", code, ct, body)
	}
	h := last()
	if h == nil {
		t.Fatal("the error backend was never asked")
	}
	for k, want := range map[string]string{
		"X-Code": "404", "X-Format": "application/json", "X-Original-URI": "/status/404?q=1", "X-Namespace": "shop",
		"X-Ingress-Name": "web", "X-Service-Name": "app", "X-Service-Port": "8080", "X-Request-ID": "req-42",
		"X-Test-Path": "/", "X-Test-Method": "GET", "X-Test-Host": "app.test", "X-Forwarded-For": "127.0.0.1",
	} {
		if got := h.Get(k); got != want {
			t.Errorf("error backend got %s %q, want %q", k, got, want)
		}
	}
	if got := h.Values("X-Forwarded-For"); len(got) != 1 {
		t.Errorf("error backend got X-Forwarded-For %q, want the client's address once", got)
	}
	code, ct, body = get("app.test", "/status/503", nil)
	// Without the client's X-Request-ID the frontend made one (a UUID,
	// forwarding.go), and the error backend gets that one.
	if h := last(); h.Get("X-Code") != "503" || len(h.Values("X-Format")) != 0 || len(h.Values("X-Request-ID")) != 1 || len(h.Get("X-Request-ID")) != 36 {
		t.Errorf("without Accept and X-Request-ID, the error backend got X-Code %q X-Format %q X-Request-ID %q, want 503, no format and a generated ID",
			h.Get("X-Code"), h.Values("X-Format"), h.Values("X-Request-ID"))
	}
	if code != 503 || body != "<p>error page 503</p>" {
		t.Errorf("503: %d %q %q, want 503 with the error page", code, ct, body)
	}
	for _, tc := range []struct {
		host, uri string
		code      int
		body      string
	}{
		{"app.test", "/ok", 200, "app ok"},
		{"app.test", "/status/410", 410, "app 410"},
		{"plain.test", "/status/404", 404, "app 404"},
	} {
		if code, ct, body := get(tc.host, tc.uri, nil); code != tc.code || body != tc.body || ct != "text/plain" {
			t.Errorf("%s%s: %d %q %q, want %d %q untouched", tc.host, tc.uri, code, ct, body, tc.code, tc.body)
		}
	}
	// A page must fit in one HAProxy buffer: 12 KiB is served, a larger
	// one keeps the original answer (it would otherwise be a 500).
	if code, _, body := get("app.test", "/status/404?size=12288", nil); code != 404 || len(body) != 12288 {
		t.Errorf("a 12 KiB error page: %d, %d bytes, want 404 with the page", code, len(body))
	}
	if code, ct, body := get("app.test", "/status/404?size=40960", nil); code != 404 || body != "app 404" || ct != "text/plain" {
		t.Errorf("a 40 KiB error page: %d %q %q, want the original 404", code, ct, body)
	}
	// HAProxy's own answers are not replaced: http-response rules do not
	// run on them (here its 503 after the retries on a refusing member).
	if code, _, body := get("dead.test", "/", nil); code != 503 || strings.Contains(body, "error page") {
		t.Errorf("dead.test: %d %q, want HAProxy's own 503", code, body)
	}
	// One keep-alive connection: a replaced answer is framed right (a
	// HEAD's has no body) and the next request on it is served.
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(conn)
	for i, tc := range []struct {
		method, uri string
		code        int
		body        string
	}{
		{"GET", "/status/404", 404, "<p>error page 404</p>"},
		{"HEAD", "/status/404", 404, ""},
		{"GET", "/ok", 200, "app ok"},
		{"GET", "/status/503", 503, "<p>error page 503</p>"},
	} {
		if _, err := io.WriteString(conn, tc.method+" "+tc.uri+" HTTP/1.1\r\nHost: app.test\r\n\r\n"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: tc.method})
		if err != nil {
			t.Fatalf("keep-alive request %d (%s %s): %v", i, tc.method, tc.uri, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || string(b) != tc.body {
			t.Errorf("keep-alive %s %s: %d %q, want %d %q", tc.method, tc.uri, resp.StatusCode, b, tc.code, tc.body)
		}
	}
	stopPages()
	start := time.Now()
	if code, ct, body := get("app.test", "/status/404", nil); code != 404 || body != "app 404" || ct != "text/plain" {
		t.Errorf("error backend down: %d %q %q, want the original 404", code, ct, body)
	}
	// Without a health check the error pool's member stays up: HAProxy
	// tries it 4 times (retries 3), a second apart, before its own 503.
	t.Logf("error backend down, no health check: the original 404 after %s", time.Since(start).Round(time.Millisecond))
}

// TestIntegrationCustomErrorsCheckedDown: with the error pool's health
// check (the default), an error backend that serves and then stops is
// marked down (fall 3, inter 2s) and the original answer then passes at
// once: no retries are spent on it.
func TestIntegrationCustomErrorsCheckedDown(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	pagesAddr, _, stopPages := startErrorPages(t)
	app := pool("app", memberAt(startStatusBackend(t)))
	addr := serveLB(t, bin, customErrorsFixture(app, pool("error-pages", memberAt(pagesAddr))))
	for i := 0; ; i++ {
		resp := rawRequest(t, addr, "127.0.0.1", "GET /status/404 HTTP/1.1\r\nHost: app.test\r\n\r\n")
		if resp.Header.Get("Content-Type") == "text/html; charset=utf-8" {
			break
		}
		if i == 50 {
			t.Fatal("the error page is never served")
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopPages()
	deadline := time.Now().Add(20 * time.Second)
	for {
		start := time.Now()
		resp := rawRequest(t, addr, "127.0.0.1", "GET /status/404 HTTP/1.1\r\nHost: app.test\r\n\r\n")
		took := time.Since(start)
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "text/plain" {
			t.Fatalf("error backend down: %d %q, want the original 404", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if took < 500*time.Millisecond {
			t.Logf("the original 404 in %s once the error backend is marked down", took.Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the original 404 still takes %s after 20 s", took)
		}
		time.Sleep(time.Second)
	}
}

// TestCustomErrorsPacked: two load balancers, each with auth-url and
// custom-http-errors on one policy (one pool is both the auth and the
// error pool), packed in one HAProxy process: each loads its own Lua
// file holding both actions under its own names, and the internal
// frontends bind distinct sockets: `haproxy -c -dW` accepts them.
func TestCustomErrorsPacked(t *testing.T) {
	bin := haproxyBin(t)
	dir := t.TempDir()
	var fragments []string
	for i, uuid := range []string{fixtureUUID, "6a1d0f7e-2b3c-4d5e-8f90-123456789abc"} {
		auth := pool("oauth2-proxy", member("10.0.0.9", 4180))
		lb := extAuthFixture(pool("app", member("10.0.0.1", 80)), pool("other", member("10.0.0.2", 80)), auth)
		lb.Listeners[0].Policies[1].Options.CustomErrors = &model.CustomErrors{PoolID: auth.ID, Codes: []int{404, 500, 503},
			Namespace: "shop", Ingress: "web", Service: "app", ServicePort: "80"}
		lb.UUID = uuid
		lb.Listeners[0].Port = 8080 + i
		at := layout.LB{UUID: uuid, Dir: filepath.Join(dir, uuid)}
		r, err := Render(lb, at, nil, fixtureOptions())
		if err != nil {
			t.Fatal(err)
		}
		for _, action := range []string{"pier_auth_" + uuid, "pier_errors_" + uuid} {
			if !strings.Contains(string(r.AuthLua), `core.register_action("`+action+`"`) {
				t.Errorf("%s: the Lua file does not register %s", uuid, action)
			}
		}
		writeMaps(t, r.Maps, "")
		writeFile(t, r.AuthLuaPath, r.AuthLua)
		writeFile(t, at.Config(), r.Fragment)
		fragments = append(fragments, at.Config())
	}
	checkFiles(t, bin, dir, fragments...)
}
