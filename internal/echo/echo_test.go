package echo

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/websocket"

	"pier.dev/pier/internal/tlscert"
)

var testIdentity = Config{Namespace: "ns-1", Ingress: "ing-1", Service: "svc-1", Pod: "pod-1"}

func TestEcho(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)

	tests := []struct {
		name, method, uri, host string
		header                  http.Header
		wantPath, wantHost      string
	}{
		{name: "root", method: "GET", uri: "/", wantPath: "/"},
		{name: "host override", method: "GET", uri: "/sub-path", host: "my-host", wantPath: "/sub-path", wantHost: "my-host"},
		{name: "query kept", method: "POST", uri: "/a?b=c&d", wantPath: "/a?b=c&d"},
		{name: "trailing slash kept", method: "GET", uri: "/foo/", wantPath: "/foo/"},
		{name: "case kept", method: "GET", uri: "/FOO", wantPath: "/FOO"},
		{name: "double slash not cleaned", method: "GET", uri: "//a//b", wantPath: "//a//b"},
		{name: "dot segments not cleaned", method: "GET", uri: "/a/../b", wantPath: "/a/../b"},
		{name: "escapes kept raw", method: "GET", uri: "/a%2Fb", wantPath: "/a%2Fb"},
		{name: "health with a suffix is echoed", method: "GET", uri: "/health/x", wantPath: "/health/x"},
		{name: "headers", method: "PATCH", uri: "/r", header: http.Header{"X-Multi": {"1", "2"}}, wantPath: "/r"},
		{name: "delete", method: "DELETE", uri: "/resource", wantPath: "/resource"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, ts, tc.method, tc.uri, tc.host, tc.header)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, want 200", resp.StatusCode)
			}
			assertHeaders(t, resp, len(body))

			// Decode into a map so the JSON names themselves are checked.
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body is not a JSON object: %v\n%s", err, body)
			}
			wantHost := tc.wantHost
			if wantHost == "" {
				wantHost = strings.TrimPrefix(ts.URL, "http://")
			}
			for key, want := range map[string]string{
				"path": tc.wantPath, "host": wantHost, "method": tc.method, "proto": "HTTP/1.1",
				"namespace": "ns-1", "ingress": "ing-1", "service": "svc-1", "pod": "pod-1",
			} {
				if got[key] != want {
					t.Errorf("%q = %v, want %q", key, got[key], want)
				}
			}
			headers, ok := got["headers"].(map[string]any)
			if !ok {
				t.Fatalf("headers = %T, want an object", got["headers"])
			}
			if ua, _ := headers["User-Agent"].([]any); len(ua) != 1 || ua[0] != "Go-http-client/1.1" {
				t.Errorf("headers.User-Agent = %v", headers["User-Agent"])
			}
			for k, vs := range tc.header {
				gotVs, _ := headers[k].([]any)
				if len(gotVs) != len(vs) {
					t.Fatalf("headers.%s = %v, want %v", k, gotVs, vs)
				}
				for i := range vs {
					if gotVs[i] != vs[i] {
						t.Errorf("headers.%s[%d] = %v, want %q", k, i, gotVs[i], vs[i])
					}
				}
			}
		})
	}
}

func TestHealth(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)
	for _, uri := range []string{"/health", "/health?probe=1"} {
		resp, body := do(t, ts, "GET", uri, "", nil)
		if resp.StatusCode != http.StatusOK || string(body) != "ok" {
			t.Errorf("GET %s = %d %q, want 200 \"ok\"", uri, resp.StatusCode, body)
		}
		if s := resp.Header.Get("Server"); s != "" {
			t.Errorf("GET %s: Server header %q, want none", uri, s)
		}
	}
}

// A large header echo must still carry Content-Length rather than go chunked.
func TestLargeEchoHasContentLength(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)
	resp, body := do(t, ts, "GET", "/big", "", http.Header{"X-Big": {strings.Repeat("x", 8000)}})
	if len(resp.TransferEncoding) != 0 {
		t.Errorf("Transfer-Encoding %v, want none", resp.TransferEncoding)
	}
	assertHeaders(t, resp, len(body))
}

func TestServeShutsDownOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, testIdentity, nil) }()

	resp, err := http.Get("http://" + addr + "/x")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d before shutdown", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatal("listener still accepts after shutdown")
	}
}

func TestRunListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })

	err = Run(t.Context(), Config{Listen: ln.Addr().String()}, nil)
	if err == nil || !strings.Contains(err.Error(), "listen") {
		t.Fatalf("Run on a busy address = %v, want a listen error", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("error %v does not wrap the *net.OpError", err)
	}
}

func do(t *testing.T, ts *httptest.Server, method, uri, host string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+uri, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func assertHeaders(t *testing.T, resp *http.Response, bodyLen int) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	if s, ok := resp.Header["Server"]; ok {
		t.Errorf("Server header %q, want none (the proxy adds it)", s)
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
	if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(bodyLen) {
		t.Errorf("Content-Length %q, want %d", cl, bodyLen)
	}
}

// TestGatewayEchoProtocol: what the Gateway API suite's echo-basic adds
// to the Ingress echo: X-Echo-Set-Header response headers, /status/<code>
// and ?delay=.
func TestGatewayEchoProtocol(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)

	resp, _ := do(t, ts, "GET", "/", "", http.Header{"X-Echo-Set-Header": {"X-Header-Set: set-value, X-Multi: a", "x-multi:b,bad name: x"}})
	if got := resp.Header.Get("X-Header-Set"); got != "set-value" {
		t.Errorf("X-Header-Set %q, want set-value", got)
	}
	// Names keep their case as sent (two lines here, which Go's client
	// reads as one canonical name).
	if got := resp.Header.Values("X-Multi"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("X-Multi %q, want [a b]", got)
	}
	for k := range resp.Header {
		if strings.Contains(k, " ") {
			t.Errorf("invalid name %q set", k)
		}
	}

	resp, body := do(t, ts, "GET", "/status/503", "", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || len(body) != 0 {
		t.Errorf("/status/503: %d %q", resp.StatusCode, body)
	}
	for _, uri := range []string{"/status/", "/status/5033", "/status/abc", "/status/099"} {
		if resp, _ := do(t, ts, "GET", uri, "", nil); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d, want the echo", uri, resp.StatusCode)
		}
	}

	start := time.Now()
	if resp, _ := do(t, ts, "GET", "/?delay=200ms", "", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("?delay=200ms: %d", resp.StatusCode)
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("?delay=200ms answered after %s", d)
	}
	for _, q := range []string{"?delay=x", "?delay=-1s", "?delay=2h"} {
		if resp, _ := do(t, ts, "GET", "/"+q, "", nil); resp.StatusCode != http.StatusInternalServerError {
			t.Errorf("%s: %d, want 500", q, resp.StatusCode)
		}
	}
}

// TestRetrySimulation: ?uuid=&responseCode=&succeedAfter= answers the
// code n times per uuid, then echoes (the Gateway suite's
// HTTPRouteRetry); another uuid counts apart; invalid parameters echo.
func TestRetrySimulation(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)
	for i, want := range []int{502, 502, 200, 200} {
		if resp, _ := do(t, ts, "GET", "/retry/x?uuid=a&responseCode=502&succeedAfter=2", "", nil); resp.StatusCode != want {
			t.Errorf("attempt %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if resp, _ := do(t, ts, "GET", "/retry/x?uuid=b&responseCode=500&succeedAfter=1", "", nil); resp.StatusCode != 500 {
		t.Errorf("another uuid: %d, want 500", resp.StatusCode)
	}
	for _, q := range []string{"?uuid=c&responseCode=200&succeedAfter=1", "?uuid=c&responseCode=x&succeedAfter=1",
		"?responseCode=500&succeedAfter=1", "?uuid=c&responseCode=500&succeedAfter=-1"} {
		if resp, _ := do(t, ts, "GET", "/retry/x"+q, "", nil); resp.StatusCode != 200 {
			t.Errorf("%s: %d, want the echo", q, resp.StatusCode)
		}
	}
}

// TestRetrySimulationDelay: ?delayRetry= holds each failing answer, not
// the final echo.
func TestRetrySimulationDelay(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)
	for i, want := range []int{500, 200} {
		start := time.Now()
		resp, _ := do(t, ts, "GET", "/retry/x?uuid=d&responseCode=500&succeedAfter=1&delayRetry=200ms", "", nil)
		took := time.Since(start)
		if resp.StatusCode != want || (want == 500) != (took >= 200*time.Millisecond) {
			t.Errorf("attempt %d: %d after %s, want %d (held 200ms only when failing)", i+1, resp.StatusCode, took, want)
		}
	}
}

// TestWebSocketEcho: /ws with Upgrade: websocket echoes frames (the
// Gateway suite's HTTPRouteBackendProtocolWebSocket); /ws without it is
// echoed as JSON like any path.
func TestWebSocketEcho(t *testing.T) {
	ts := httptest.NewServer(NewServer(testIdentity, nil))
	t.Cleanup(ts.Close)
	ws, err := websocket.Dial("ws"+strings.TrimPrefix(ts.URL, "http")+WebSocketPath, "", "ws://gateway/test")
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	if err := websocket.Message.Send(ws, "hello"); err != nil {
		t.Fatal(err)
	}
	var reply string
	if err := websocket.Message.Receive(ws, &reply); err != nil || reply != "hello" {
		t.Fatalf("reply %q, %v", reply, err)
	}
	bin := []byte{1, 2, 3}
	var binReply []byte
	if err := websocket.Message.Send(ws, bin); err != nil {
		t.Fatal(err)
	}
	if err := websocket.Message.Receive(ws, &binReply); err != nil || string(binReply) != string(bin) {
		t.Fatalf("binary reply %v, %v", binReply, err)
	}
	resp, body := do(t, ts, "GET", WebSocketPath, "", nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"path":"/ws"`) {
		t.Errorf("/ws without Upgrade: %d %s", resp.StatusCode, body)
	}
}

// TestServeShutdownDelay: with a shutdown delay the server keeps
// answering new connections after the cancel, then stops.
func TestServeShutdownDelay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	cfg := testIdentity
	cfg.ShutdownDelay = 500 * time.Millisecond
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, cfg, nil) }()
	waitUp := time.Now().Add(2 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(waitUp) {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	time.Sleep(200 * time.Millisecond)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + "/during")
	if err != nil {
		t.Fatalf("a request within the delay: %v", err)
	}
	_ = resp.Body.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the delay")
	}
}

// TestServeH2COnly: with H2COnly an HTTP/2 request with prior knowledge
// in clear is echoed (proto HTTP/2.0) and an HTTP/1.1 one gets 400, as
// echo-basic's H2C_PORT answers.
func TestServeH2COnly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := testIdentity
	cfg.H2COnly = true
	go func() { _ = Serve(t.Context(), ln, cfg, nil) }()
	url := "http://" + ln.Addr().String() + "/h2c"

	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	client := &http.Client{Transport: &http.Transport{Protocols: &h2c}, Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var got Response
	err = json.NewDecoder(resp.Body).Decode(&got)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || got.Proto != "HTTP/2.0" || got.Pod != "pod-1" {
		t.Fatalf("h2c: status %d, %+v, %v", resp.StatusCode, got, err)
	}

	resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "Expected h2c request") {
		t.Fatalf("HTTP/1.1: status %d %q, want 400", resp.StatusCode, body)
	}
}

// Over TLS the echo reports the SNI the client sent (the suite checks
// what a proxy's backend TLS sent); in clear there is no "tls" object.
func TestEchoReportsTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(NewServer(Config{}, nil))
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig.ServerName = "abc.example.com"
	client.Transport.(*http.Transport).TLSClientConfig.InsecureSkipVerify = true
	resp, err := client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Response
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.TLS == nil || got.TLS.ServerName != "abc.example.com" || got.TLS.Version == "" {
		t.Errorf("tls %+v, want the SNI abc.example.com", got.TLS)
	}
	if got.TLS != nil && len(got.TLS.PeerCertificates) != 0 {
		t.Errorf("peer certificates %q from a client that presented none", got.TLS.PeerCertificates)
	}
	plain := httptest.NewServer(NewServer(Config{}, nil))
	defer plain.Close()
	r2, err := http.Get(plain.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(r2.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["tls"]; ok {
		t.Errorf("a clear request reports tls: %v", body["tls"])
	}
}

// A client certificate the client presented comes back PEM-encoded, as
// the file it was read from holds it: the suite compares the two.
func TestEchoReportsThePeerCertificate(t *testing.T) {
	certPEM, keyPEM, err := tlscert.SelfSigned([]string{"client.example"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(NewServer(Config{}, nil))
	srv.EnableHTTP2 = false
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig.Certificates = []tls.Certificate{pair}
	resp, err := client.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got Response
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if got.TLS == nil || len(got.TLS.PeerCertificates) != 1 || got.TLS.PeerCertificates[0] != string(certPEM) {
		t.Errorf("tls %+v, want the client certificate\n%s", got.TLS, certPEM)
	}
}
