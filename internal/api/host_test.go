package api

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"pier.dev/pier/internal/store/bolt"
)

// serveOn runs a Server with a web view on a real listener at listen and
// returns the address it listens on.
func serveOn(t *testing.T, listen string, allowed ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("listen %s: %v", listen, err)
	}
	ui := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "<html>web view</html>") })
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s := &Server{Store: st, Registry: prometheus.NewRegistry(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		UI: ui, AllowedHosts: allowed}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Serve(ctx, ln, time.Minute); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return ln.Addr().String()
}

// get sends one request to addr with the Host header given as is.
func get(t *testing.T, addr, path, host string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n"
	if host == "" {
		req = "GET " + path + " HTTP/1.0\r\n\r\n"
	}
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestHostGuard: DNS rebinding. A page of evil.example whose name now
// resolves to 127.0.0.1 asks pier's API and web view with Host
// evil.example: refused with 421 and a short reason. The listener's own
// address (with any port, as a port forward changes it), localhost on a
// loopback or wildcard listener, and the names the operator lists are
// answered.
func TestHostGuard(t *testing.T) {
	loop := serveOn(t, "127.0.0.1:0", "pier-controller.pier-system.svc", "10.96.0.10")
	_, port, _ := net.SplitHostPort(loop)
	wild := serveOn(t, "0.0.0.0:0")
	_, wildPort, _ := net.SplitHostPort(wild)
	for _, tc := range []struct {
		addr, host string
		want       int
	}{
		{loop, "127.0.0.1:" + port, 200},
		{loop, "127.0.0.1", 200},
		{loop, "127.0.0.1:1234", 200},
		{loop, "localhost:" + port, 200},
		{loop, "LocalHost.", 200},
		{loop, "pier-controller.pier-system.svc:8082", 200},
		{loop, "PIER-controller.pier-system.svc", 200},
		{loop, "10.96.0.10:8082", 200},
		{loop, "", 200}, // HTTP/1.0 without Host: no browser sends that
		{loop, "evil.example", 421},
		{loop, "evil.example:" + port, 421},
		{loop, "127.0.0.1.evil.example", 421},
		{loop, "localhost.evil.example", 421},
		{loop, "a.localhost", 421},
		{loop, "10.0.0.1", 421}, // not the address it listens on
		{loop, "[::1]:" + port, 421},
		{wild, "203.0.113.7:" + wildPort, 200},
		{wild, "[2001:db8::1]:" + wildPort, 200},
		{wild, "localhost:" + wildPort, 200},
		{wild, "evil.example:" + wildPort, 421},
	} {
		for _, path := range []string{"/healthz", "/loadbalancers", "/"} {
			code, body := get(t, tc.addr, path, tc.host)
			if code != tc.want {
				t.Errorf("%s Host %q on %s: %d %s, want %d", path, tc.host, tc.addr, code, strings.TrimSpace(body), tc.want)
			}
			if code == 421 && (!strings.Contains(body, "--api-allowed-hosts") || strings.Contains(body, "web view")) {
				t.Errorf("%s Host %q: refusal body %q", path, tc.host, body)
			}
		}
	}
}

func TestCheckAllowedHosts(t *testing.T) {
	if err := CheckAllowedHosts([]string{"pier.example", "pier-api.ns.svc.cluster.local", "10.0.0.1", "fd00::1"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"", "pier.example:8082", "http://pier.example", "*", "a b"} {
		if err := CheckAllowedHosts([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
