// Package rawhttp sends malformed HTTP/1.x, byte for byte, to a real
// HAProxy running a configuration that render.Config produced, and pins
// what HAProxy answers and what reaches the backend, per HAProxy version.
// An HAProxy upgrade that changes any answer fails the test with the new
// table, to be reviewed and pinned, instead of changing pier's exposure
// silently.
package rawhttp

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/testport"
)

const (
	haproxyBin = "/usr/sbin/haproxy"
	fixtureID  = "8c1f7a52-3b9e-4d06-a1f4-2e7d5c9b0a63"
	victimHost = "victim.example"
	// requestTimeout is Options.Timeouts.HTTPRequest: short, so the slow
	// client case gets its 408 within the test's patience.
	requestTimeout = time.Second
)

// haproxyVersion is the full version haproxy -v prints: Debian's
// "2.6.12-1+deb12u4" carries backported parser fixes that upstream
// 2.6.12 lacks, so the package revision is part of the key.
func haproxyVersion(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(haproxyBin); err != nil {
		t.Skipf("no HAProxy at %s", haproxyBin)
	}
	out, err := exec.Command(haproxyBin, "-v").Output()
	if err != nil {
		t.Fatalf("haproxy -v: %v", err)
	}
	m := regexp.MustCompile(`HAProxy version (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("haproxy -v: no version in %q", out)
	}
	return string(m[1])
}

// request is what the backend received, as Go's server parsed it.
type request struct {
	method, uri, host string
	header, trailer   http.Header
	body              string
	bodyErr           error
}

// recorder is the pool's only member: it answers 200 to everything and
// keeps every request it was handed, and every byte it read, since Go's
// server refuses some requests before a handler sees them.
type recorder struct {
	mu   sync.Mutex
	seen []request
	raw  bytes.Buffer
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	r.mu.Lock()
	r.seen = append(r.seen, request{req.Method, req.RequestURI, req.Host, req.Header.Clone(),
		req.Trailer.Clone(), string(body), err})
	r.mu.Unlock()
	w.Header().Set("X-Backend", "app")
	io.WriteString(w, "ok\n")
}

// matching returns the requests whose URI contains marker.
func (r *recorder) matching(marker string) []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []request
	for _, q := range r.seen {
		if strings.Contains(q.uri, marker) {
			out = append(out, q)
		}
	}
	return out
}

// forwarded reports whether marker is in the bytes the backend read.
func (r *recorder) forwarded(marker string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Contains(r.raw.Bytes(), []byte(marker))
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.raw.Bytes())
}

// tap copies what a connection reads into the recorder.
type tap struct {
	net.Conn
	rec *recorder
}

func (c tap) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.rec.mu.Lock()
	c.rec.raw.Write(p[:n])
	c.rec.mu.Unlock()
	return n, err
}

type tapListener struct {
	net.Listener
	rec *recorder
}

func (l tapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tap{c, l.rec}, nil
}

func startBackend(t *testing.T) (*recorder, *net.TCPAddr) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	srv := &http.Server{Handler: rec, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(tapListener{l, rec})
	t.Cleanup(func() { srv.Close() })
	return rec, l.Addr().(*net.TCPAddr)
}

// fixture is one HTTP listener with pier's routing: requests for
// victim.example go to the recorder, except the prefix /admin, which a
// REJECT policy answers with 403; any other host gets pier's 404.
func fixture(port int, member *net.TCPAddr) *model.LoadBalancer {
	pool := model.Pool{ID: model.ID("pool", "rawhttp", "app", "80"), Name: "rawhttp_app_80",
		Namespace: "rawhttp", Service: "app", Port: "80", Algorithm: model.AlgorithmRoundRobin,
		Members: []model.Member{{Address: member.IP.String(), Port: member.Port, Weight: 1}}}
	host := model.L7Rule{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: victimHost}
	prefix := func(p string) model.L7Rule {
		return model.L7Rule{Type: model.RulePath, Compare: model.CompareStartsWith, Value: p}
	}
	return &model.LoadBalancer{
		UUID: fixtureID, Name: "rawhttp/app", Provider: model.ProviderHAProxy, VIP: "127.0.0.1",
		Listeners: []model.Listener{{Name: model.DefaultHTTPListenerName, Protocol: model.ProtocolHTTP, Port: port,
			Policies: []model.L7Policy{
				{ID: model.ID("admin"), Position: 1, Action: model.ActionReject, Rules: []model.L7Rule{host, prefix("/admin")}},
				{ID: model.ID("app"), Position: 2, Action: model.ActionRedirectToPool, PoolID: pool.ID, Rules: []model.L7Rule{host, prefix("/")}},
			}}},
		Pools: []model.Pool{pool},
	}
}

// startHAProxy renders the fixture, runs "haproxy -W -f" in its own
// process group until the test ends, and returns the listener address.
func startHAProxy(t *testing.T, member *net.TCPAddr) string {
	dir, err := os.MkdirTemp("", "pier-rawhttp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	port := freePort(t)
	opts := render.Options{Dir: dir, MinSlots: 1, Timeouts: render.Timeouts{HTTPRequest: requestTimeout}}
	cfg, err := render.Config(fixture(port, member), opts)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := render.Maps(fixture(port, member), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if err := os.WriteFile(m.Path, m.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "haproxy.conf")
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd := exec.Command(haproxyBin, "-W", "-f", path)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { stopGroup(cmd.Process.Pid, done) })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		select {
		case <-done:
			t.Fatalf("haproxy exited:\n%s\nconfig:\n%s", out.String(), cfg)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("haproxy not listening on %s:\n%s", addr, out.String())
		}
	}
}

// stopGroup ends the master and its workers: SIGTERM to the group we
// created, SIGKILL if it lingers.
func stopGroup(pgid int, done <-chan struct{}) {
	syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	return testport.Get(t)
}
