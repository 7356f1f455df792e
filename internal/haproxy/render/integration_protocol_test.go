package render

import (
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestIntegrationBackendProtocol: backend-protocol through a real
// HAProxy. HTTPS reaches a TLS member over HTTP/1.1, GRPC an h2c-only
// member over HTTP/2 in clear, GRPCS a TLS member over HTTP/2 by ALPN.
// A gRPC-style call (HTTP/2 from the client, trailers back) goes through
// both gRPC pools with its Grpc-Status trailer. The control: a pool
// without the annotation pointed at the TLS member does not get a 200.
func TestIntegrationBackendProtocol(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	tlsMember := startTLSBackend(t, "https", false)
	https := pool("https", memberAt(tlsMember))
	https.Protocol = model.BackendHTTPS
	grpc := pool("grpc", memberAt(startH2CBackend(t, "grpc")))
	grpc.Protocol = model.BackendGRPC
	grpcs := pool("grpcs", memberAt(startTLSBackend(t, "grpcs", true)))
	grpcs.Protocol = model.BackendGRPCS
	plain := pool("plain", memberAt(tlsMember))
	addr := serveLB(t, bin, newLB([]model.Listener{httpListener("", routes(
		toPool(https, hostIs("https.test"), pathPrefix("/")),
		toPool(grpc, hostIs("grpc.test"), pathPrefix("/")),
		toPool(grpcs, hostIs("grpcs.test"), pathPrefix("/")),
		toPool(plain, hostIs("plain.test"), pathPrefix("/")),
	))}, https, grpc, grpcs, plain))

	for _, tc := range []struct{ host, backend, proto, tls string }{
		{"https.test", "https", "HTTP/1.1", "yes"},
		{"grpc.test", "grpc", "HTTP/2.0", "no"},
		{"grpcs.test", "grpcs", "HTTP/2.0", "yes"},
	} {
		r := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
		h := r.Header
		if r.StatusCode != 200 || h.Get("X-Backend") != tc.backend || h.Get("X-Seen-Proto") != tc.proto || h.Get("X-Seen-TLS") != tc.tls {
			t.Errorf("%s: %d from %q over %q, TLS %q; want 200 from %s over %s, TLS %s", tc.host, r.StatusCode,
				h.Get("X-Backend"), h.Get("X-Seen-Proto"), h.Get("X-Seen-TLS"), tc.backend, tc.proto, tc.tls)
		}
	}
	for _, host := range []string{"grpc.test", "grpcs.test"} {
		checkGRPCStyleCall(t, addr, host)
	}
	if r := rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: plain.test\r\n\r\n"); r.StatusCode == 200 {
		t.Errorf("plain HTTP to a TLS member answered 200: the protocol setting proves nothing")
	}
}

// checkGRPCStyleCall sends a POST with content-type application/grpc
// over HTTP/2 in clear (prior knowledge, as gRPC clients do) and wants
// the member's body and its Grpc-Status trailer back.
func checkGRPCStyleCall(t *testing.T, addr, host string) {
	t.Helper()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Protocols: &p}}
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+addr+"/pkg.Svc/Call", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Host = host
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", host, err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "reply" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("%s: %s %d body %q trailers %v", host, resp.Proto, resp.StatusCode, body, resp.Trailer)
	}
}

// protocolHandler reports the protocol and TLS it was reached over, and
// answers a gRPC-style call with a body and a Grpc-Status trailer.
func protocolHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Backend", name)
		w.Header().Set("X-Seen-Proto", r.Proto)
		w.Header().Set("X-Seen-TLS", map[bool]string{true: "yes", false: "no"}[r.TLS != nil])
		if r.Header.Get("Content-Type") == "application/grpc" {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Trailer", "Grpc-Status")
			io.WriteString(w, "reply")
			w.Header().Set("Grpc-Status", "0")
			return
		}
		io.WriteString(w, name)
	})
}

var quietLog = log.New(io.Discard, "", 0)

// startTLSBackend serves over TLS with a self-signed certificate,
// offering h2 by ALPN when h2 is set.
func startTLSBackend(t *testing.T, name string, h2 bool) string {
	srv := httptest.NewUnstartedServer(protocolHandler(name))
	srv.EnableHTTP2 = h2
	srv.Config.ErrorLog = quietLog // health checks and the plain-HTTP control end handshakes early
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// startH2CBackend speaks only HTTP/2 in clear, with prior knowledge.
func startH2CBackend(t *testing.T, name string) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: protocolHandler(name), Protocols: &p, ErrorLog: quietLog}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}
