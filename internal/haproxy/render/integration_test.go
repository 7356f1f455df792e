package render

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/testport"
)

// TestIntegration starts a real HAProxy (master-worker) on loopback from a
// rendered config, with small Go backends, and checks routing, the Server
// header, X-Forwarded-Proto, SNI certificate choice, the NUL guard, and a
// members-only change applied through the runtime socket.
func TestIntegration(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	be := map[string]string{} // backend name -> address
	for _, name := range []string{"exact", "prefix", "foobar", "wild", "default", "exact2"} {
		be[name] = startBackend(t, name)
	}
	lb, httpPort, tlsPort := integrationLB(be)
	dir := t.TempDir()
	opts := Options{Dir: dir, MinSlots: 4}
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := Render(lb, lbAt(dir), nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, first.CrtListPath, first.CrtList)
	roots := x509.NewCertPool()
	for _, c := range lb.Listeners[1].Certificates {
		p, _ := lbAt(dir).Cert(c.ID, c.SHA256)
		pemBytes := selfSigned(t, c.Hosts)
		writeFile(t, p, pemBytes)
		roots.AppendCertsFromPEM(pemBytes)
	}
	path := dir + "/haproxy.conf"
	writeFile(t, path, cfg)
	startHAProxy(t, bin, path, httpPort, tlsPort)

	c := &client{t: t, http: "127.0.0.1:" + strconv.Itoa(httpPort), tls: "127.0.0.1:" + strconv.Itoa(tlsPort), roots: roots}
	for _, tc := range []struct{ host, path, want string }{
		{"exact.test", "/foo", "exact"},
		{"EXACT.test:" + strconv.Itoa(httpPort), "/foo", "exact"}, // lowercased, port stripped
		{"exact.test", "/foo/", "prefix"},
		{"exact.test", "/foo/x", "prefix"},
		{"exact.test", "/foobar", "404"},
		{"exact.test", "/FOO", "404"},
		{"exact.test", "/admin", "403"},
		{"exact.test", "/admin/x", "prefix-of-nothing-404"},
		{"foo.bar.com", "/anything", "foobar"},
		{"bar.foo.com", "/", "wild"},
		{"baz.bar.foo.com", "/", "404"},
		{"foo.com", "/", "404"},
		{"unknown.test", "/", "404"},
	} {
		if tc.want == "prefix-of-nothing-404" {
			tc.want = "404" // Exact /admin does not cover /admin/x
		}
		c.expect("http", tc.host, tc.path, tc.want, "http")
	}
	c.expect("https", "foo.bar.com", "/", "foobar", "https")
	c.expect("https", "bar.foo.com", "/", "wild", "https")
	c.expect("https", "other.test", "/", "default", "https") // TLS listener has a default pool
	c.expectNULRefused()

	// Members only: a second member joins "exact" through the runtime API.
	next := lb.Clone()
	next.Pools[0].Members = append(next.Pools[0].Members, memberAt(be["exact2"]))
	second, err := Render(next, lbAt(dir), first.Slots, opts)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanUpdate(first, second)
	if err != nil || plan.Reload || len(plan.Commands) == 0 {
		t.Fatalf("plan: %+v %v", plan, err)
	}
	for _, cmd := range plan.Commands {
		runtimeCommand(t, procAt(dir).Socket(), cmd.String())
	}
	seen := map[string]bool{}
	for range 20 {
		seen[c.get("http", "exact.test", "/foo").Header.Get("X-Backend")] = true
	}
	if !seen["exact"] || !seen["exact2"] {
		t.Fatalf("after runtime commands, served by %v", seen)
	}
}

// integrationLB: an HTTP listener with no default pool (404) and a TLS
// listener with one, both with the same policies.
func integrationLB(be map[string]string) (*model.LoadBalancer, int, int) {
	p := map[string]model.Pool{}
	var pools []model.Pool
	for _, name := range []string{"exact", "prefix", "foobar", "wild", "default"} {
		pl := pool(name, memberAt(be[name]))
		pl.HealthCheck = name != "default"
		p[name] = pl
		pools = append(pools, pl)
	}
	policies := func() []model.L7Policy {
		return routes(
			toPool(p["exact"], hostIs("exact.test"), pathIs("/foo")),
			toPool(p["prefix"], hostIs("exact.test"), pathPrefix("/foo")),
			reject(hostIs("exact.test"), pathIs("/admin")),
			toPool(p["foobar"], hostIs("foo.bar.com"), pathPrefix("/")),
			toPool(p["wild"], hostWild("*.foo.com"), pathPrefix("/")),
		)
	}
	httpPort, tlsPort := freePort(), freePort()
	lb := newLB([]model.Listener{
		{Name: "http", Protocol: model.ProtocolHTTP, Port: httpPort, Policies: policies()},
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: tlsPort, Policies: policies(), DefaultPoolID: p["default"].ID,
			Certificates: []model.Certificate{
				{ID: model.ID("c1"), Hosts: []string{"foo.bar.com"}, SHA256: "1"},
				{ID: model.ID("c2"), Hosts: []string{"*.foo.com"}, SHA256: "2"},
			}},
	}, pools...)
	lb.VIP, lb.FIP = "127.0.0.1", ""
	return lb, httpPort, tlsPort
}

func memberAt(addr string) model.Member {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return member(host, n)
}

func freePort() int {
	p, err := testport.Free()
	if err != nil {
		panic(err)
	}
	return p
}

// startBackend serves its name and what it saw; like the conformance
// echo server it sends no Server header.
func startBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Proto", r.Header.Get("X-Forwarded-Proto"))
		w.Header().Set("X-Seen-Host", r.Host)
		io.WriteString(w, name)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// startHAProxy runs "haproxy -W -f cfg" until the test ends, then stops
// the master it started (SIGTERM, which also stops its worker).
func startHAProxy(t *testing.T, bin, cfg string, ports ...int) {
	var out bytes.Buffer
	cmd := exec.Command(bin, "-W", "-f", cfg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for _, port := range ports {
		for {
			conn, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err == nil {
				conn.Close()
				break
			}
			select {
			case err := <-done:
				done <- err // for the cleanup, which waits on it
				t.Fatalf("haproxy exited: %v\n%s", err, out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("haproxy not listening on %d:\n%s", port, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func runtimeCommand(t *testing.T, socket, cmd string) {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, cmd+"\n")
	resp, _ := io.ReadAll(conn)
	for _, bad := range []string{"Unknown", "No such", "Require", "invalid", "error"} {
		if strings.Contains(string(resp), bad) {
			t.Fatalf("%s: %s", cmd, resp)
		}
	}
}

type client struct {
	t         *testing.T
	http, tls string
	roots     *x509.CertPool
}

// get sends one request. Over TLS the certificate must verify for host,
// except for hosts no certificate covers (they get the default one).
func (c *client) get(scheme, host, path string) *http.Response {
	c.t.Helper()
	addr := c.http
	tr := &http.Transport{DisableKeepAlives: true}
	if scheme == "https" {
		addr = c.tls
		tr.TLSClientConfig = &tls.Config{ServerName: host, RootCAs: c.roots, InsecureSkipVerify: strings.HasSuffix(host, ".test")}
	}
	req, _ := http.NewRequest("GET", scheme+"://"+addr+path, nil)
	req.Host = host
	req.Header.Set("X-Forwarded-Proto", "spoofed")
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		c.t.Fatalf("%s://%s%s: %v", scheme, host, path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// expect: want is a backend name or a status code HAProxy answers itself.
func (c *client) expect(scheme, host, path, want, proto string) {
	c.t.Helper()
	resp := c.get(scheme, host, path)
	if s := resp.Header.Get("Server"); s != "pier" {
		c.t.Errorf("%s %s%s: Server header %q", scheme, host, path, s)
	}
	if code, err := strconv.Atoi(want); err == nil {
		if resp.StatusCode != code {
			c.t.Errorf("%s %s%s: status %d, want %d (backend %q)", scheme, host, path, resp.StatusCode, code, resp.Header.Get("X-Backend"))
		}
		return
	}
	if got := resp.Header.Get("X-Backend"); resp.StatusCode != 200 || got != want {
		c.t.Errorf("%s %s%s: status %d from %q, want %s", scheme, host, path, resp.StatusCode, got, want)
	}
	if got := resp.Header.Get("X-Seen-Proto"); got != proto {
		c.t.Errorf("%s %s%s: backend saw X-Forwarded-Proto %q", scheme, host, path, got)
	}
	if scheme == "https" && strings.HasSuffix(host, ".test") {
		// No SNI filter matches: the first crt-list line is the default.
		if names := resp.TLS.PeerCertificates[0].DNSNames; names[0] != "foo.bar.com" {
			c.t.Errorf("https %s: default certificate %v", host, names)
		}
	}
}

// expectNULRefused: HAProxy 2.6 would forward a NUL inside a header value;
// the frontend's guard answers 400.
func (c *client) expectNULRefused() {
	conn, err := net.Dial("tcp", c.http)
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET /foo HTTP/1.1\r\nHost: exact.test\r\nX-A: a\x00b\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != 400 || resp.Header.Get("X-Backend") != "" {
		c.t.Errorf("NUL in header value: status %d, backend %q", resp.StatusCode, resp.Header.Get("X-Backend"))
	}
}
