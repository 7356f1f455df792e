package haproxydriver

import (
	"bufio"
	"crypto/tls"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// A TLS listener in tls.mode Terminate served by the driver: it writes
// the listener's decrypt certificate from its Secret (HAProxy would not
// start without the file), the decrypted bytes reach the TCP member in
// plain text, and its certificate file is kept while it is served.
func TestDecryptServed(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	secret := &oneSecret{}
	d := newDriver(t, state)
	d.cfg.Secrets = secret
	t.Cleanup(func() { d.Close(true) })

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
				line, _ := bufio.NewReader(c).ReadString('\n')
				io.WriteString(c, "plain "+line)
			}()
		}
	}()
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Pools = append(lb.Pools, model.Pool{ID: "tcp1", Name: "ns_plain_80_tcp", TCP: true,
		Members: []model.Member{memberAt(ln.Addr().String())}})
	tlsPort := freePort(t)
	cert := secret.rotate(t)
	lb.Listeners = append(lb.Listeners, model.Listener{Name: "tls", Protocol: model.ProtocolTerminatedHTTPS,
		Port: tlsPort, DecryptCertificates: []model.Certificate{cert},
		Passthrough: []model.PassthroughRoute{{Host: "tls.example", PoolID: "tcp1", Decrypt: true}}})
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(tlsPort)),
		&tls.Config{ServerName: "tls.example", InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "hello\n")
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if cn := conn.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "tls.example" || answer != "plain hello\n" {
		t.Errorf("certificate %q, answer %q (%v); want tls.example and the line in plain text", cn, answer, err)
	}
	var certs []string
	filepath.WalkDir(state, func(path string, _ fs.DirEntry, _ error) error {
		if filepath.Ext(path) == ".pem" && filepath.Base(filepath.Dir(path)) == "certs" {
			certs = append(certs, path)
		}
		return nil
	})
	if len(certs) != 1 {
		t.Errorf("certificate files %q under %s, want the decrypt certificate's", certs, state)
	}
}
