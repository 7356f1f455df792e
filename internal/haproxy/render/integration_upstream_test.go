package render

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// testCA signs certificates for the upstream TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for cn (and DNS name cn) and its key, PEM.
func (ca *testCA) issue(t *testing.T, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// startVerifiedBackend serves TLS with a certificate for name from ca,
// asks for a client certificate, and reports the SNI it received and the
// client certificate's common name.
func startVerifiedBackend(t *testing.T, ca *testCA, name string) string {
	certPEM, keyPEM := ca.issue(t, name, x509.ExtKeyUsageServerAuth)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Seen-SNI", r.TLS.ServerName)
		if len(r.TLS.PeerCertificates) > 0 {
			w.Header().Set("X-Client-CN", r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		io.WriteString(w, "verified")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert}
	srv.Config.ErrorLog = quietLog // failed verifications end handshakes early
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// TestIntegrationUpstreamTLS: proxy-ssl-* through a real HAProxy. A
// member with a certificate from a test CA: verified with that CA and
// its name, it answers 200, receives the name as SNI and sees the client
// certificate; with another CA, or another name, HAProxy refuses the
// handshake and the client gets 503. The control for SNI: without
// proxy-ssl-server-name the member receives none.
func TestIntegrationUpstreamTLS(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	ca, other := newTestCA(t, "pier test CA"), newTestCA(t, "other CA")
	member := memberAt(startVerifiedBackend(t, ca, "backend.internal"))
	clientCert, clientKey := ca.issue(t, "pier-client", x509.ExtKeyUsageClientAuth)
	good, _ := tlscert.ParseCA(ca.pem)
	wrong, _ := tlscert.ParseCA(other.pem)
	client, err := tlscert.Parse(clientCert, clientKey)
	if err != nil || good == nil || wrong == nil {
		t.Fatal(err)
	}
	mk := func(svc string, u model.UpstreamTLS) model.Pool {
		p := pool(svc, member)
		p.Protocol, p.UpstreamTLS = model.BackendHTTPS, &u
		return p
	}
	verified := mk("verified", model.UpstreamTLS{Verify: true, SNI: true, Name: "backend.internal", CASHA256: good.SHA256, ClientSHA256: client.SHA256})
	wrongCA := mk("wrongca", model.UpstreamTLS{Verify: true, SNI: true, Name: "backend.internal", CASHA256: wrong.SHA256})
	wrongName := mk("wrongname", model.UpstreamTLS{Verify: true, SNI: true, Name: "other.internal", CASHA256: good.SHA256})
	noSNI := mk("nosni", model.UpstreamTLS{Verify: true, Name: "backend.internal", CASHA256: good.SHA256})
	lb := newLB([]model.Listener{httpListener("", routes(
		toPool(verified, hostIs("verified.test"), pathPrefix("/")),
		toPool(wrongCA, hostIs("wrongca.test"), pathPrefix("/")),
		toPool(wrongName, hostIs("wrongname.test"), pathPrefix("/")),
		toPool(noSNI, hostIs("nosni.test"), pathPrefix("/")),
	))}, verified, wrongCA, wrongName, noSNI)
	addr := serveLBWithFiles(t, bin, lb, func(dir string) {
		for _, f := range []struct {
			path func(string) (string, error)
			sha  string
			data []byte
		}{{lbAt(dir).UpstreamCA, good.SHA256, good.PEM}, {lbAt(dir).UpstreamCA, wrong.SHA256, wrong.PEM},
			{lbAt(dir).UpstreamClient, client.SHA256, client.Combined()}} {
			p, err := f.path(f.sha)
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, p, f.data)
		}
	})
	get := func(host string) *http.Response {
		return rawRequest(t, addr, "127.0.0.1", "GET /x HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
	}
	r := get("verified.test")
	if r.StatusCode != 200 || r.Header.Get("X-Seen-SNI") != "backend.internal" || r.Header.Get("X-Client-CN") != "pier-client" {
		t.Errorf("verified: %d, SNI %q, client %q; want 200, backend.internal, pier-client", r.StatusCode,
			r.Header.Get("X-Seen-SNI"), r.Header.Get("X-Client-CN"))
	}
	if r := get("nosni.test"); r.StatusCode != 200 || r.Header.Get("X-Seen-SNI") != "" || r.Header.Get("X-Client-CN") != "" {
		t.Errorf("nosni: %d, SNI %q, client %q; want 200 without SNI nor client certificate", r.StatusCode,
			r.Header.Get("X-Seen-SNI"), r.Header.Get("X-Client-CN"))
	}
	for _, host := range []string{"wrongca.test", "wrongname.test"} {
		if r := get(host); r.StatusCode != 503 {
			t.Errorf("%s: %d, want 503", host, r.StatusCode)
		}
	}
}

// serveLBWithFiles is serveLB with files the fragment names written into
// its folder first (write), as the agent stages them; HAProxy is awaited
// on the other ports too.
func serveLBWithFiles(t *testing.T, bin string, lb *model.LoadBalancer, write func(dir string), more ...int) string {
	t.Helper()
	port := freePort()
	lb.Listeners[0].Port, lb.VIP, lb.FIP = port, "127.0.0.1", ""
	startLB(t, bin, lb, Options{MinSlots: 4, Users: fixtureUsers}, write, append([]int{port}, more...)...)
	return "127.0.0.1:" + strconv.Itoa(port)
}

// startLB runs lb (its ports and addresses set) as a process of its own
// in a new folder, with its maps and what write puts there, and waits
// for ports.
func startLB(t *testing.T, bin string, lb *model.LoadBalancer, opts Options, write func(dir string), ports ...int) {
	t.Helper()
	dir := t.TempDir()
	opts.Dir = dir
	cfg, err := Config(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	maps, err := Maps(lb, opts)
	if err != nil {
		t.Fatal(err)
	}
	writeMaps(t, maps, "")
	if write != nil {
		write(dir)
	}
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", ports...)
}
