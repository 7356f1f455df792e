package faults

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// selfSigned makes a certificate for host with the given serial (ECDSA
// P-256: cheap enough to make 21 on a busy machine).
func selfSigned(t *testing.T, host string, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: host},
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// serials is the set of certificates written so far: a client accepts any
// of them (the old one may serve until the new one is live), nothing else.
type serials struct {
	mu      sync.Mutex
	written map[int64]bool
}

func (s *serials) add(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written[n] = true
}

// tlsConfig checks the served leaf by serial instead of a CA chain: every
// certificate here is self-signed.
func (s *serials) tlsConfig(host string) *tls.Config {
	return &tls.Config{ServerName: host, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("no certificate served")
			}
			n := cs.PeerCertificates[0].SerialNumber
			s.mu.Lock()
			defer s.mu.Unlock()
			if !n.IsInt64() || !s.written[n.Int64()] {
				return fmt.Errorf("served certificate serial %s was never written", n)
			}
			return nil
		}}
}

// servedSerial opens one TLS connection with SNI host and returns the
// leaf's serial (-1 on failure).
func servedSerial(addr string, port int, host string) int64 {
	nd := &net.Dialer{Timeout: 2 * time.Second}
	c, err := tls.DialWithDialer(nd, "tcp", net.JoinHostPort(addr, strconv.Itoa(port)),
		&tls.Config{ServerName: host, InsecureSkipVerify: true})
	if err != nil {
		return -1
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

const (
	rotations    = 20
	rotateWithin = 3 * time.Second
)

// TestSecretRotation rotates a TLS Secret 20 times under HTTPS load.
func TestSecretRotation(t *testing.T) {
	const host = "secure.example"
	e := newEnv(t)
	write(t, e.manifests, "secure-svc.yaml", backendYAML("secure", pods(startEchos(t, "secure", 1))))
	s := &serials{written: map[int64]bool{1: true}}
	cert, key := selfSigned(t, host, 1)
	write(t, e.manifests, "secure-tls.yaml", tlsSecretYAML("secure-tls", cert, key))
	ing := simple("secure", "", host, "secure")
	ing.tlsSecret, ing.tlsHosts = "secure-tls", []string{host}
	write(t, e.manifests, "secure.yaml", ing.yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/secure")
	if got := servedSerial(lb.VIP, p.HTTPSPort, host); got != 1 {
		t.Fatalf("before rotation: served serial %d, want 1", got)
	}
	hashBefore, reloadsBefore := e.configHash(lb.UUID), reloads(p)

	l := startLoad(target{name: "https", addr: lb.VIP, port: p.HTTPSPort, host: host, path: "/", tls: s.tlsConfig(host)})
	time.Sleep(500 * time.Millisecond)
	var lags []time.Duration
	for serial := int64(2); serial <= rotations+1; serial++ {
		cert, key := selfSigned(t, host, serial)
		s.add(serial)
		written := time.Now()
		write(t, e.manifests, "secure-tls.yaml", tlsSecretYAML("secure-tls", cert, key))
		live := poll(rotateWithin+5*time.Second, func() bool { return servedSerial(lb.VIP, p.HTTPSPort, host) == serial })
		lag := time.Since(written)
		if !live {
			t.Errorf("rotation %d: serial %d not served %s after the Secret was written (HAProxy serves %d; "+
				"the certificate file pier wrote has serial %d; LB state %s)", serial-1, serial, lag.Round(time.Millisecond),
				servedSerial(lb.VIP, p.HTTPSPort, host), serialOnDisk(e.lbDir(lb.UUID)), lbState(p, lb.UUID))
			break
		}
		lags = append(lags, lag)
		if lag > rotateWithin {
			t.Errorf("rotation %d: the new certificate took %s to be served, want ≤ %s", serial-1, lag, rotateWithin)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	all := l.stop()

	total := report(t, all)
	var worst time.Duration
	for _, d := range lags {
		worst = max(worst, d)
	}
	t.Logf("secret rotation: %d of %d rotations served, slowest %s, %d HTTPS requests, %v reloads (no runtime cert update), config %s → %s",
		len(lags), rotations, worst.Round(time.Millisecond), total, reloads(p)-reloadsBefore, hashBefore, e.configHash(lb.UUID))
	requireNoErrors(t, all)
}

// serialOnDisk is the serial of the certificate in the load balancer's
// certs folder (-1 if there is not exactly one).
func serialOnDisk(dir string) int64 {
	files, _ := filepath.Glob(filepath.Join(dir, "certs", "*.pem"))
	if len(files) != 1 {
		return -1
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return -1
	}
	block, _ := pem.Decode(b)
	if block == nil {
		return -1
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return -1
	}
	return c.SerialNumber.Int64()
}
