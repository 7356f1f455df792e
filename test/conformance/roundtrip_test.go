package conformance

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/echo"
)

func TestBuildRequest(t *testing.T) {
	tests := []struct {
		name    string
		c       client
		t       target
		wantURL string
		host    string
		wantErr bool
	}{
		{"default ports are left out", client{address: "10.0.0.1", httpPort: 80, httpsPort: 443},
			target{"GET", "http", "my-host", ""}, "http://10.0.0.1/", "my-host", false},
		{"https default port", client{address: "lb.example", httpPort: 80, httpsPort: 443},
			target{"GET", "https", "foo.bar.com", "/"}, "https://lb.example/", "foo.bar.com", false},
		{"files cluster ports", client{address: "127.0.1.3", httpPort: 18080, httpsPort: 18443},
			target{"PUT", "http", "", "resource"}, "http://127.0.1.3:18080/resource", "127.0.1.3:18080", false},
		{"https port", client{address: "127.0.1.3", httpPort: 18080, httpsPort: 18443},
			target{"GET", "https", "foo.bar.com", ""}, "https://127.0.1.3:18443/", "foo.bar.com", false},
		{"one leading slash is dropped", client{address: "10.0.0.1", httpPort: 80},
			target{"GET", "http", "h", "/aaa/bbb/"}, "http://10.0.0.1/aaa/bbb/", "h", false},
		{"ipv6", client{address: "fd00::1", httpPort: 80},
			target{"GET", "http", "h", "x"}, "http://[fd00::1]/x", "h", false},
		{"ipv6 with port", client{address: "fd00::1", httpPort: 8080},
			target{"GET", "http", "h", "x"}, "http://[fd00::1]:8080/x", "h", false},
		{"unknown scheme", client{address: "10.0.0.1"}, target{"GET", "ftp", "h", ""}, "", "", true},
		{"no address yet", client{httpPort: 80}, target{"GET", "http", "h", ""}, "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := tc.c.buildRequest(t.Context(), tc.t)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("no error, built %s", req.URL)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.URL.String() != tc.wantURL || req.Host != tc.host || req.Method != tc.t.Method {
				t.Errorf("got %s %s Host %q, want %s %s Host %q", req.Method, req.URL, req.Host, tc.t.Method, tc.wantURL, tc.host)
			}
		})
	}
}

func TestParseTarget(t *testing.T) {
	tests := []struct {
		raw  string
		want target
	}{
		{"http://foo.bar.com", target{"GET", "http", "foo.bar.com", ""}},
		{"https://foo.bar.com", target{"GET", "https", "foo.bar.com", ""}},
		{"http://exact-path-rules/foo/", target{"GET", "http", "exact-path-rules", "/foo/"}},
		{"http://prefix-path-rules/FOO", target{"GET", "http", "prefix-path-rules", "/FOO"}},
	}
	for _, tc := range tests {
		got, err := parseTarget("GET", tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("parseTarget(%q) = %+v, %v; want %+v", tc.raw, got, err, tc.want)
		}
	}
}

// echoClient serves an echo backend on plain HTTP and returns a client
// whose Ingress address is that server.
func echoClient(t *testing.T, h http.Handler) client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return client{address: "127.0.0.1", httpPort: portOf(t, ts.Listener.Addr()), timeout: 5 * time.Second}
}

func portOf(t *testing.T, a net.Addr) int {
	t.Helper()
	_, p, err := net.SplitHostPort(a.String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

func TestRoundTripCapturesTheEcho(t *testing.T) {
	c := echoClient(t, echo.NewServer(echo.Config{Namespace: "ns", Ingress: "ing", Service: "echo-service", Pod: "pod-a"}, nil))

	req, res, err := c.roundTrip(t.Context(), target{"DELETE", "http", "some-host", "resource"})
	if err != nil {
		t.Fatal(err)
	}
	e := exchange{req: req, res: res}
	for _, check := range []error{
		e.statusCode(200), e.servedBy("echo-service"), e.responseProto("HTTP/1.1"),
		e.method("DELETE"), e.requestPath("resource"), e.requestProto("HTTP/1.1"),
		e.requestHost("some-host"), e.requestHeader("User-Agent", "Go-http-client/1.1"),
		e.responseHeader("Content-Type", "application/json"), e.responseHeader("Content-Length", "*"),
		e.responseHeader("Date", "*"),
	} {
		if check != nil {
			t.Error(check)
		}
	}
	// pier echo sends no Server header; the proxy has to.
	if err := e.responseHeader("Server", "*"); err == nil {
		t.Error("Server header check passed against the bare echo server")
	}
	if req.Pod != "pod-a" || req.Namespace != "ns" || req.Ingress != "ing" {
		t.Errorf("identity %+v", req)
	}

	// No host: the address (with its port) is the Host header.
	req, _, err = c.roundTrip(t.Context(), target{"PUT", "http", "", "resource"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "127.0.0.1:" + strconv.Itoa(c.httpPort); req.Host != want {
		t.Errorf("Host %q, want %q", req.Host, want)
	}
}

func TestRoundTripNonJSONBody(t *testing.T) {
	c := echoClient(t, http.NotFoundHandler())
	req, res, err := c.roundTrip(t.Context(), target{"GET", "http", "foo.com", ""})
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 404 || req.Service != "" {
		t.Errorf("got %d served by %q, want 404 with an empty capture", res.StatusCode, req.Service)
	}
	e := exchange{req: req, res: res}
	if e.servedBy("foo") == nil {
		t.Error("served-by passed on an error page")
	}
}

func TestRoundTripRequestError(t *testing.T) {
	c := client{address: "127.0.0.1", httpPort: closedPort(t), timeout: time.Second}
	if _, _, err := c.roundTrip(t.Context(), target{"GET", "http", "h", ""}); err == nil {
		t.Fatal("no error from a closed port")
	}
}

// tlsEcho serves the echo backend over HTTPS with cert and records the
// server names clients asked for.
func tlsEcho(t *testing.T, certPEM, keyPEM []byte, h http.Handler) (int, func() []string) {
	t.Helper()
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var names []string
	ts := httptest.NewUnstartedServer(h)
	ts.TLS = &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		mu.Lock()
		names = append(names, hello.ServerName)
		mu.Unlock()
		return &pair, nil
	}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return portOf(t, ts.Listener.Addr()), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), names...)
	}
}

func TestTLSAndRedirect(t *testing.T) {
	cert, certPEM, keyPEM, err := selfSignedCert([]string{"foo.bar.com"})
	if err != nil {
		t.Fatal(err)
	}
	httpsPort, sni := tlsEcho(t, certPEM, keyPEM, echo.NewServer(echo.Config{Service: "foo-bar-com"}, nil))
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://foo.bar.com/landing?q=1", http.StatusFound)
	})
	c := echoClient(t, redirect)
	c.httpsPort = httpsPort

	// The redirect is followed to the same address, on the HTTPS port, with
	// the Location's host as Host header and server name.
	req, res, err := c.roundTrip(t.Context(), target{"GET", "http", "foo.bar.com", "/"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Host != "foo.bar.com" || req.Path != "/landing" || req.Service != "foo-bar-com" {
		t.Errorf("after redirect: host %q path %q service %q", req.Host, req.Path, req.Service)
	}
	if got := sni(); len(got) != 1 || got[0] != "foo.bar.com" {
		t.Errorf("server names %v, want [foo.bar.com]", got)
	}

	roots := x509.NewCertPool()
	roots.AddCert(cert)
	e := exchange{req: req, res: res}
	if err := e.secureConnection("foo.bar.com", roots); err != nil {
		t.Errorf("verify foo.bar.com: %v", err)
	}
	if err := e.secureConnection("bar.foo.com", roots); err == nil {
		t.Error("verified for a host the certificate does not name")
	}
	other, _, _, err := selfSignedCert([]string{"foo.bar.com"})
	if err != nil {
		t.Fatal(err)
	}
	otherRoots := x509.NewCertPool()
	otherRoots.AddCert(other)
	if err := e.secureConnection("foo.bar.com", otherRoots); err == nil || !strings.Contains(err.Error(), "does not verify") {
		t.Errorf("verified against a certificate that was not served: %v", err)
	}
}

func TestSecureConnectionNeedsHTTPS(t *testing.T) {
	c := echoClient(t, echo.NewServer(echo.Config{}, nil))
	req, res, err := c.roundTrip(t.Context(), target{"GET", "http", "foo.bar.com", ""})
	if err != nil {
		t.Fatal(err)
	}
	if err := (exchange{req: req, res: res}).secureConnection("foo.bar.com", nil); err == nil {
		t.Error("TLS check passed on plain HTTP")
	}
}

func TestMaxRedirects(t *testing.T) {
	loop := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://again/loop", http.StatusMovedPermanently)
	})
	c := echoClient(t, loop)
	if _, _, err := c.roundTrip(t.Context(), target{"GET", "http", "h", ""}); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v, want a redirect error", err)
	}
}
