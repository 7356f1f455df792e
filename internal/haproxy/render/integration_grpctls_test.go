package render

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// TestIntegrationGRPCOverTLS: a TLS listener with a route to a gRPC pool
// offers h2 by ALPN, and a gRPC-style call over TLS (HTTP/2 negotiated,
// as gRPC clients require) gets the member's body and Grpc-Status
// trailer; a TLS listener of plain HTTP pools offers HTTP/1.1 only, which
// is what keeps the drain's Connection: close working there.
func TestIntegrationGRPCOverTLS(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	grpc := pool("grpc", memberAt(startH2CBackend(t, "grpc")))
	grpc.Protocol = model.BackendGRPC
	plain := pool("plain", memberAt(startBackend(t, "plain")))
	cert := model.Certificate{ID: model.ID("c1"), SHA256: "1"}
	serve := func(pools ...model.Pool) string {
		var policies []model.L7Policy
		for _, p := range pools {
			policies = append(policies, toPool(p, hostIs(p.Service+".test"), pathPrefix("/")))
		}
		lb := newLB([]model.Listener{{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
			Certificates: []model.Certificate{cert}, Policies: routes(policies...)}}, pools...)
		return serveLBWithFiles(t, bin, lb, func(dir string) {
			r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, r.CrtListPath, r.CrtList)
			p, _ := lbAt(dir).Cert(cert.ID, cert.SHA256)
			writeFile(t, p, selfSigned(t, []string{"grpc.test", "plain.test"}))
		})
	}

	withGRPC := serve(grpc, plain)
	tr := &http.Transport{TLSClientConfig: &tls.Config{ServerName: "grpc.test", InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(context.Background(), "POST", "https://"+withGRPC+"/pkg.Svc/Call", strings.NewReader("\x00\x00\x00\x00\x00"))
	req.Host = "grpc.test"
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("TE", "trailers")
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("gRPC call over TLS: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(body) != "reply" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Errorf("gRPC call over TLS: %s %d body %q trailers %v, want HTTP/2 200 \"reply\" with Grpc-Status 0", resp.Proto, resp.StatusCode, body, resp.Trailer)
	}

	plainOnly := serve(plain)
	// Every TLS bind names its ALPN: the plain listener offers HTTP/1.1
	// alone under 2.6 and 3.0 alike (HAProxy 2.8 and later would offer h2
	// on a bind that names none, and a drain cannot close h2).
	plainWant := "http/1.1"
	for addr, want := range map[string]string{withGRPC: "h2", plainOnly: plainWant} {
		c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: "plain.test", InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}})
		if err != nil {
			t.Fatalf("TLS to %s: %v", addr, err)
		}
		got := c.ConnectionState().NegotiatedProtocol
		c.Close()
		if got != want {
			t.Errorf("ALPN on %s: %q, want %q", addr, got, want)
		}
	}
}
