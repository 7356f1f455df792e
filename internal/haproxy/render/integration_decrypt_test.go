package render

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// startPlainBackend answers each connection's first line with "plain "
// and that line: what a TCP backend behind decrypted TLS reads.
func startPlainBackend(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					io.WriteString(c, "plain "+line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// tlsLine connects to addr with SNI sni (none when ""), sends one line
// and returns the certificate's common name and the answer.
func tlsLine(t *testing.T, addr, sni, line string) (cn, answer string, err error) {
	t.Helper()
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	cn = conn.ConnectionState().PeerCertificates[0].Subject.CommonName
	io.WriteString(conn, line+"\n")
	answer, err = bufio.NewReader(conn).ReadString('\n')
	return cn, answer, err
}

// TestIntegrationDecrypt: TLS listeners in tls.mode Terminate through a
// real HAProxy, on one port with a Passthrough one and an HTTPS one (the
// Gateway API's mixed termination). An SNI of a decrypted route gets
// that route's certificate (an exact name, a wildcard; a name two labels
// under the wildcard, which no certificate's wildcard covers, the
// listener's first) and its bytes reach the TCP member in plain text; a passed-through SNI reaches the
// member's own TLS; the HTTPS host is terminated as HTTP; every other
// SNI is refused. A decrypting listener alone, without hostname, serves
// a client without SNI its own certificate.
func TestIntegrationDecrypt(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	ptPool := pool("pt", memberAt(startPassthroughBackend(t, "member.pt.test")))
	ptPool.ID, ptPool.TCP = model.ID("tcp", "pt"), true
	plain := pool("plain", memberAt(startPlainBackend(t)))
	plain.ID, plain.TCP = model.ID("tcp", "plain"), true
	web := pool("web", memberAt(startForwardedBackend(t)))
	port := freePort()
	https := model.Certificate{ID: model.ID("https"), Hosts: []string{"term.test"}, SHA256: "1"}
	exact := model.Certificate{ID: model.ID("exact"), Hosts: []string{"tls.test"}, SHA256: "2"}
	wild := model.Certificate{ID: model.ID("wild"), Hosts: []string{"*.wild.test"}, SHA256: "3"}
	lb := newLB([]model.Listener{
		httpListener("", routes(toPool(web, hostIs("term.test"), pathPrefix("/")))),
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: port, Certificates: []model.Certificate{https},
			DecryptCertificates: []model.Certificate{exact, wild},
			Policies:            routes(toPool(web, hostIs("term.test"), pathPrefix("/"))),
			Passthrough: []model.PassthroughRoute{
				{Host: "pt.test", PoolID: ptPool.ID},
				{Host: "tls.test", PoolID: plain.ID, Decrypt: true},
				{Host: "*.wild.test", PoolID: plain.ID, Decrypt: true},
				{Host: "term.test", Terminate: true},
				{Host: ""},
			}},
	}, web, ptPool, plain)
	writeCerts := func(lb *model.LoadBalancer, certs ...model.Certificate) func(string) {
		return func(dir string) {
			r, err := Render(lb, lbAt(dir), nil, Options{Dir: dir, MinSlots: 4})
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, r.CrtListPath, r.CrtList)
			for _, c := range certs {
				p, _ := lbAt(dir).Cert(c.ID, c.SHA256)
				writeFile(t, p, selfSigned(t, c.Hosts))
			}
		}
	}
	serveLBWithFiles(t, bin, lb, writeCerts(lb, https, exact, wild), port)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for _, tc := range []struct{ sni, cn string }{{"tls.test", "tls.test"}, {"TLS.test", "tls.test"}, {"a.wild.test", "*.wild.test"}, {"b.a.wild.test", "tls.test"}} {
		cn, answer, err := tlsLine(t, addr, tc.sni, "hello")
		if err != nil || cn != tc.cn || answer != "plain hello\n" {
			t.Errorf("SNI %q: certificate %q, answer %q, %v; want %q and the line in plain text", tc.sni, cn, answer, err, tc.cn)
		}
	}
	if cn, body, err := tlsGet(t, addr, "pt.test", "pt.test"); err != nil || cn != "member.pt.test" || body != "passed through pt.test" {
		t.Errorf("SNI pt.test: certificate %q, body %q, %v; want the member's", cn, body, err)
	}
	if cn, body, err := tlsGet(t, addr, "term.test", "term.test"); err != nil || cn != "term.test" || body != "terminated from 127.0.0.1 " {
		t.Errorf("SNI term.test: certificate %q, body %q, %v; want HTTPS", cn, body, err)
	}
	for _, sni := range []string{"other.test", "wild.test", ""} {
		if cn, answer, err := tlsLine(t, addr, sni, "hello"); err == nil {
			t.Errorf("SNI %q: certificate %q, answer %q; want the connection refused", sni, cn, answer)
		}
	}

	// Decrypting alone, every SNI and none: the listener's certificate,
	// not another's, for a client without SNI.
	only := newLB([]model.Listener{
		httpListener("", routes(toPool(web, hostIs("term.test"), pathPrefix("/")))),
		{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: freePort(), Certificates: []model.Certificate{https},
			Policies: routes(toPool(web, hostIs("term.test"), pathPrefix("/")))},
		{Name: "tls", Protocol: model.ProtocolTerminatedHTTPS, Port: freePort(), DecryptCertificates: []model.Certificate{exact},
			Passthrough: []model.PassthroughRoute{{Host: "", PoolID: plain.ID, Decrypt: true}}},
	}, web, plain)
	serveLBWithFiles(t, bin, only, writeCerts(only, https, exact), only.Listeners[1].Port, only.Listeners[2].Port)
	onlyAddr := "127.0.0.1:" + strconv.Itoa(only.Listeners[2].Port)
	for _, sni := range []string{"", "any.example"} {
		if cn, answer, err := tlsLine(t, onlyAddr, sni, "hi"); err != nil || cn != "tls.test" || answer != "plain hi\n" {
			t.Errorf("decrypting alone, SNI %q: certificate %q, answer %q, %v", sni, cn, answer, err)
		}
	}
}
