package render

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// startPassthroughBackend terminates TLS itself with a certificate of
// its own for host, and reports the SNI it received.
func startPassthroughBackend(t *testing.T, host string) string {
	pair, err := tls.X509KeyPair(splitPEM(selfSigned(t, []string{host})))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-SNI", r.TLS.ServerName)
		io.WriteString(w, "passed through")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = quietLog // health checks close without a handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// splitPEM splits selfSigned's output into certificate and key.
func splitPEM(b []byte) ([]byte, []byte) {
	i := strings.Index(string(b), "-----BEGIN EC PRIVATE KEY")
	return b[:i], b[i:]
}

// startForwardedBackend answers with the X-Forwarded-For it received.
func startForwardedBackend(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "terminated from "+r.Header.Get("X-Forwarded-For"))
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// tlsGet connects to addr with SNI sni (none when ""), and returns the
// certificate's common name the client was shown and the body of GET /.
func tlsGet(t *testing.T, addr, sni, host string) (cn, body string, err error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	cn = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: "+host+"\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return cn, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return cn, string(b) + " " + resp.Header.Get("X-Seen-SNI"), nil
}

// TestIntegrationPassthrough: ssl-passthrough through a real HAProxy.
// On one address, a client with SNI pt.test talks TLS with the member
// itself (it sees the member's certificate, the member sees the SNI);
// a client with SNI term.test gets pier's certificate and the HTTP
// route, with its own address forwarded across the hand-off (PROXY
// header); an unknown SNI, or none, gets the default certificate. The
// same listener without certificates passes pt.test and closes others.
func TestIntegrationPassthrough(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	ptPool := pool("pt", memberAt(startPassthroughBackend(t, "member.pt.test")))
	ptPool.ID, ptPool.TCP = model.ID("tcp", "pt"), true
	web := pool("web", memberAt(startForwardedBackend(t)))
	httpsPort := freePort()
	cert := model.Certificate{ID: model.ID("c1"), Hosts: []string{"term.test"}, SHA256: "1"}
	lb := newLB([]model.Listener{
		httpListener("", routes(toPool(web, hostIs("term.test"), pathPrefix("/")))),
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: httpsPort, Certificates: []model.Certificate{cert},
			Policies:    routes(toPool(web, hostIs("term.test"), pathPrefix("/"))),
			Passthrough: []model.PassthroughRoute{{Host: "pt.test", PoolID: ptPool.ID}}},
	}, web, ptPool)
	addr := serveLBWithFiles(t, bin, lb, func(dir string) {
		r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.CrtListPath, r.CrtList)
		p, _ := lbAt(dir).Cert(cert.ID, cert.SHA256)
		writeFile(t, p, selfSigned(t, cert.Hosts))
	}, httpsPort)
	tlsAddr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	_ = addr
	for _, tc := range []struct{ sni, host, cn, body string }{
		{"pt.test", "pt.test", "member.pt.test", "passed through pt.test"},
		{"PT.test", "pt.test", "member.pt.test", "passed through PT.test"}, // SNI is case-insensitive
		{"term.test", "term.test", "term.test", "terminated from 127.0.0.1 "},
		{"unknown.test", "term.test", "term.test", "terminated from 127.0.0.1 "},
		{"", "term.test", "term.test", "terminated from 127.0.0.1 "},
	} {
		cn, body, err := tlsGet(t, tlsAddr, tc.sni, tc.host)
		if err != nil || cn != tc.cn || body != tc.body {
			t.Errorf("SNI %q: certificate %q, body %q, %v; want %q, %q", tc.sni, cn, body, err, tc.cn, tc.body)
		}
	}

	// Passthrough alone: no certificate, no terminating frontend.
	only := newLB([]model.Listener{
		httpListener("", routes(toPool(web, hostIs("term.test"), pathPrefix("/")))),
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: freePort(),
			Passthrough: []model.PassthroughRoute{{Host: "pt.test", PoolID: ptPool.ID}}},
	}, web, ptPool)
	serveLBWithFiles(t, bin, only, func(string) {}, only.Listeners[1].Port)
	onlyAddr := "127.0.0.1:" + strconv.Itoa(only.Listeners[1].Port)
	if cn, body, err := tlsGet(t, onlyAddr, "pt.test", "pt.test"); err != nil || cn != "member.pt.test" || body != "passed through pt.test" {
		t.Errorf("passthrough only: %q %q %v", cn, body, err)
	}
	if cn, _, err := tlsGet(t, onlyAddr, "unknown.test", "x"); err == nil {
		t.Errorf("passthrough only, unknown SNI: handshake with %q, want the connection closed", cn)
	}
}

// TestIntegrationPassthroughSNI: a Gateway's TLS listeners through a
// real HAProxy. Exact and wildcard SNIs are passed to the member (a
// wildcard over two labels too, the exact name before the wildcard, the
// longer wildcard before the shorter); a name under a TLS listener's
// wildcard that no route serves is refused, not terminated; an HTTPS
// listener's host under that wildcard is terminated; every other SNI,
// and none, is refused (a TLS listener without hostname).
func TestIntegrationPassthroughSNI(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	ptPool := pool("pt", memberAt(startPassthroughBackend(t, "member.pt.test")))
	ptPool.ID, ptPool.TCP = model.ID("tcp", "pt"), true
	web := pool("web", memberAt(startForwardedBackend(t)))
	httpsPort := freePort()
	cert := model.Certificate{ID: model.ID("c1"), Hosts: []string{"term.test"}, SHA256: "1"}
	lb := newLB([]model.Listener{
		httpListener("", routes(toPool(web, hostIs("term.test"), pathPrefix("/")))),
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: httpsPort, Certificates: []model.Certificate{cert},
			Policies: routes(toPool(web, hostIs("term.test"), pathPrefix("/"))),
			Passthrough: []model.PassthroughRoute{
				{Host: "pt.test", PoolID: ptPool.ID},
				{Host: "*.apps.test", PoolID: ptPool.ID},
				{Host: "*.test"},
				{Host: "term.test", Terminate: true},
				{Host: ""},
			}},
	}, web, ptPool)
	serveLBWithFiles(t, bin, lb, func(dir string) {
		r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, r.CrtListPath, r.CrtList)
		p, _ := lbAt(dir).Cert(cert.ID, cert.SHA256)
		writeFile(t, p, selfSigned(t, cert.Hosts))
	}, httpsPort)
	tlsAddr := "127.0.0.1:" + strconv.Itoa(httpsPort)
	for _, tc := range []struct{ sni, cn, body string }{
		{"pt.test", "member.pt.test", "passed through pt.test"},
		{"a.apps.test", "member.pt.test", "passed through a.apps.test"},
		{"b.a.apps.test", "member.pt.test", "passed through b.a.apps.test"},
		{"term.test", "term.test", "terminated from 127.0.0.1 "},
	} {
		cn, body, err := tlsGet(t, tlsAddr, tc.sni, "term.test")
		if err != nil || cn != tc.cn || body != tc.body {
			t.Errorf("SNI %q: certificate %q, body %q, %v; want %q, %q", tc.sni, cn, body, err, tc.cn, tc.body)
		}
	}
	for _, sni := range []string{"other.test", "apps.test", "unknown.example", ""} {
		if cn, body, err := tlsGet(t, tlsAddr, sni, "term.test"); err == nil {
			t.Errorf("SNI %q: certificate %q, body %q; want the connection refused", sni, cn, body)
		}
	}
}
