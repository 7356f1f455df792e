package render

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// TestIntegrationClientValidation: a Gateway's spec.tls.frontend through
// a real HAProxy. On the port that requires a certificate, a client with
// one from the listener's CA is served; one from another CA, or without
// one, fails the handshake (HAProxy's TLS alert: no HTTP answer at all).
// On the port with the insecure fallback, all three are served. The
// server certificate is the same on both ports, so only the bind's
// options differ.
func TestIntegrationClientValidation(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	ca, other := newTestCA(t, "pier client CA"), newTestCA(t, "other CA")
	bundle, err := tlscert.ParseCA(ca.pem)
	if err != nil {
		t.Fatal(err)
	}
	be := pool("app", memberAt(startBackend(t, "app")))
	cert := model.Certificate{ID: model.ID("c1"), SHA256: "1"}
	listener := func(optional bool) model.Listener {
		return model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Certificates: []model.Certificate{cert},
			ClientValidation: &model.ClientValidation{CAs: []model.ConfigMapRef{{Namespace: "ns", Name: "ca"}}, SHA256: bundle.SHA256, Optional: optional},
			Policies:         routes(toPool(be, hostIs("app.test"), pathPrefix("/")))}
	}
	lb := newLB([]model.Listener{listener(false), listener(true)}, be)
	optionalPort := freePort()
	lb.Listeners[1].Port = optionalPort
	addr := serveLBWithFiles(t, bin, lb, func(dir string) {
		r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.CrtListPath, r.CrtList)
		p, _ := lbAt(dir).Cert(cert.ID, cert.SHA256)
		writeFile(t, p, selfSigned(t, []string{"app.test"}))
		p, err = lbAt(dir).ClientCA(bundle.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, p, bundle.PEM)
	}, optionalPort)
	optionalAddr := "127.0.0.1:" + strconv.Itoa(optionalPort)
	pair := func(c *testCA) *tls.Certificate {
		crt, key := c.issue(t, "client", x509.ExtKeyUsageClientAuth)
		kp, err := tls.X509KeyPair(crt, key)
		if err != nil {
			t.Fatal(err)
		}
		return &kp
	}
	good, wrong := pair(ca), pair(other)
	for _, tc := range []struct {
		name   string
		addr   string
		client *tls.Certificate
		served bool
	}{
		{"required, the CA's", addr, good, true},
		{"required, another CA's", addr, wrong, false},
		{"required, none", addr, nil, false},
		{"fallback, the CA's", optionalAddr, good, true},
		{"fallback, another CA's", optionalAddr, wrong, true},
		{"fallback, none", optionalAddr, nil, true},
	} {
		code, asked, err := clientCertRequest(tc.addr, tc.client)
		if tc.served && (err != nil || code != http.StatusOK) {
			t.Errorf("%s: %d, %v; want 200", tc.name, code, err)
		}
		if !tc.served && err == nil {
			t.Errorf("%s: answered %d, want the handshake refused", tc.name, code)
		}
		if !asked {
			t.Errorf("%s: HAProxy asked for no client certificate", tc.name)
		}
	}
}

// clientCertRequest sends GET / for app.test over TLS, presenting client
// (none when nil) when asked, and returns the status and whether a
// certificate was asked for.
func clientCertRequest(addr string, client *tls.Certificate) (int, bool, error) {
	asked := false
	cfg := &tls.Config{ServerName: "app.test", InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			asked = true
			if client == nil {
				return &tls.Certificate{}, nil
			}
			return client, nil
		}}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return 0, asked, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	// With TLS 1.3 the server checks the certificate after the client's
	// handshake ends: its refusal comes as an alert on the first read.
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: app.test\r\nConnection: close\r\n\r\n"); err != nil {
		return 0, asked, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, asked, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, asked, nil
}
