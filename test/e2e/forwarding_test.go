package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// forwardingManifests: one plain Ingress in front of the echo backend.
const forwardingManifests = pierClass + `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: app, namespace: shop}
spec:
  ingressClassName: pier
  rules:
    - host: app.example
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: echo, port: {number: 80}}}}]}
` + shopEcho

// forgedHeaders are what a client sends to pass for someone else.
var forgedHeaders = map[string]string{
	"X-Real-IP": "6.6.6.6", "X-Forwarded-For": "1.2.3.4, 5.6.7.8", "X-Forwarded-Host": "evil.example",
	"X-Forwarded-Port": "1", "X-Forwarded-Proto": "https", "Forwarded": "for=6.6.6.6", "X-Original-URI": "/admin",
	"X-Request-ID": "trace-42",
}

// TestForwardingHeaders runs `pier run` and sends forged forwarding
// headers from 127.0.0.2: without --trusted-proxies every one is
// replaced or removed (the client's sane X-Request-ID is kept); with
// --trusted-proxies 127.0.0.2 they are kept and X-Forwarded-For is
// appended to, while 127.0.0.1 is still not trusted. pier echo reports
// the headers it received.
func TestForwardingHeaders(t *testing.T) {
	pod := harness.StartEcho(t, "echo", "echo-pod")
	m := strings.ReplaceAll(forwardingManifests, "ECHOPORT", strconv.Itoa(pod))
	const gone = "\x00" // the backend must not see the header at all
	own := func(port int) map[string]string {
		return map[string]string{"X-Real-Ip": "127.0.0.2", "X-Forwarded-For": "127.0.0.2", "X-Forwarded-Host": "app.example",
			"X-Forwarded-Port": strconv.Itoa(port), "X-Forwarded-Proto": "http", "Forwarded": gone, "X-Original-Uri": gone, "X-Request-Id": "trace-42"}
	}
	t.Run("default", func(t *testing.T) {
		p := startWith(t, m)
		checkSeen(t, p, "127.0.0.2", own(p.HTTPPort))
	})
	t.Run("trusted", func(t *testing.T) {
		p := startWith(t, m, "--trusted-proxies", "127.0.0.2/32")
		checkSeen(t, p, "127.0.0.2", map[string]string{"X-Real-Ip": "5.6.7.8", "X-Forwarded-For": "1.2.3.4, 5.6.7.8, 127.0.0.2",
			"X-Forwarded-Host": "evil.example", "X-Forwarded-Port": "1", "X-Forwarded-Proto": "https", "Forwarded": "for=6.6.6.6",
			"X-Original-Uri": gone, "X-Request-Id": "trace-42"})
		untrusted := own(p.HTTPPort)
		untrusted["X-Real-Ip"], untrusted["X-Forwarded-For"] = "127.0.0.1", "127.0.0.1"
		checkSeen(t, p, "127.0.0.1", untrusted)
	})
}

func startWith(t *testing.T, manifests string, args ...string) *harness.Pier {
	dir, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	harness.WriteFile(t, filepath.Join(dir, "app.yaml"), manifests)
	return harness.StartPier(t, harness.Options{Manifests: dir, State: state, ExtraArgs: args})
}

var generatedID = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkSeen sends the forged headers from the address from, then a
// request with an unsafe X-Request-ID, and compares what pier echo saw.
func checkSeen(t *testing.T, p *harness.Pier, from string, want map[string]string) {
	t.Helper()
	vip := p.Addresses("shop", "app")[0]
	seen := seenFrom(t, p, vip, from, forgedHeaders)
	for name, value := range want {
		got := seen[name]
		if value == "\x00" && len(got) == 0 {
			continue
		}
		if len(got) != 1 || got[0] != value {
			t.Errorf("from %s: backend saw %s %q, want %q", from, name, got, strings.Trim(value, "\x00"))
		}
	}
	for _, id := range []string{"", "a b", strings.Repeat("x", 129), "<script>"} {
		got := seenFrom(t, p, vip, from, map[string]string{"X-Request-ID": id})["X-Request-Id"]
		if len(got) != 1 || !generatedID.MatchString(got[0]) {
			t.Errorf("from %s, X-Request-ID %q: backend saw %q, want a generated UUID", from, id, got)
		}
	}
}

// seenFrom sends one GET from the local address from and returns the
// request headers pier echo reports.
func seenFrom(t *testing.T, p *harness.Pier, vip, from string, headers map[string]string) http.Header {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		}}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(vip, strconv.Itoa(p.HTTPPort))+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "app.example"
	for k, v := range headers {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var reply struct {
		Headers http.Header `json:"headers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil || resp.StatusCode != 200 {
		t.Fatalf("from %s: %d %v", from, resp.StatusCode, err)
	}
	return reply.Headers
}
