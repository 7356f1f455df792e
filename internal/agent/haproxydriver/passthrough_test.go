package haproxydriver

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
	"pier.dev/pier/test/harness"
)

// sniCertCN is the common name of the certificate shown to a client
// with SNI sni on 127.0.0.1:port.
func sniCertCN(port int, sni string) (string, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{ServerName: sni, InsecureSkipVerify: true})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// A load balancer with ssl-passthrough beside a terminated host keeps
// both across reloads: the hand-off socket between its SNI frontend and
// its terminating frontend moves to the new worker.
func TestPassthroughAcrossReloads(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	secret := &oneSecret{}
	d := newDriver(t, state)
	d.cfg.Secrets = secret
	t.Cleanup(func() { d.Close(true) })

	certPEM, keyPEM, err := tlscert.SelfSigned([]string{"member.pt.example"}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, _ := tls.X509KeyPair(certPEM, keyPEM)
	member := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "member") }))
	member.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	member.StartTLS()
	t.Cleanup(member.Close)

	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Pools = append(lb.Pools, model.Pool{ID: "tcp1", Name: "ns_pt_443_passthrough", TCP: true,
		Members: []model.Member{memberAt(member.Listener.Addr().String())}})
	tlsPort := freePort(t)
	lb.Listeners = append(lb.Listeners, model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS,
		Port: tlsPort, DefaultPoolID: "p1", Certificates: []model.Certificate{secret.rotate(t)},
		Passthrough: []model.PassthroughRoute{{Host: "pt.example", PoolID: "tcp1"}}})
	check := func(when string) {
		t.Helper()
		if cn, err := sniCertCN(tlsPort, "pt.example"); err != nil || cn != "member.pt.example" {
			t.Errorf("%s: passthrough host shows %q (%v)", when, cn, err)
		}
		if cn, err := sniCertCN(tlsPort, "tls.example"); err != nil || cn != "tls.example" {
			t.Errorf("%s: terminated host shows %q (%v)", when, cn, err)
		}
	}
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	check("first start")
	for i := range 2 {
		next := lb.Clone()
		next.Listeners[1].Passthrough = append(next.Listeners[1].Passthrough,
			model.PassthroughRoute{Host: "pt" + strconv.Itoa(i) + ".example", PoolID: "tcp1"})
		if _, err := d.Apply(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		check("reload " + strconv.Itoa(i+1))
	}
}
