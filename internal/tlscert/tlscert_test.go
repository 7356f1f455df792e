package tlscert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"
)

var future = time.Now().Add(365 * 24 * time.Hour)

func selfSigned(t *testing.T, hosts ...string) (cert, key []byte) {
	t.Helper()
	cert, key, err := SelfSigned(hosts, future)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// issue signs tmpl with parent/parentKey (self-signed when parent is nil)
// and returns the certificate PEM; crafted certificates for bad names.
func issue(t *testing.T, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	if tmpl.SerialNumber == nil {
		tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), future
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func ecKey(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func TestParse(t *testing.T) {
	cert, key := selfSigned(t, "a.example", "*.b.example", "127.0.0.1")
	p, err := Parse(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.DNSNames, ","); got != "a.example,*.b.example" {
		t.Errorf("DNSNames = %s", got)
	}
	if !p.NotAfter.Equal(future.Truncate(time.Second)) || p.Expired() {
		t.Errorf("NotAfter = %v (want %v), Expired = %v", p.NotAfter, future, p.Expired())
	}
	if p.Leaf.Subject.CommonName != "a.example" {
		t.Errorf("Leaf CN = %q", p.Leaf.Subject.CommonName)
	}
	for host, want := range map[string]bool{"a.example": true, "x.b.example": true, "x.y.b.example": false, "c.example": false} {
		if p.CoversHost(host) != want {
			t.Errorf("CoversHost(%s) = %v, want %v", host, !want, want)
		}
	}
	sum := sha256.Sum256(p.Combined())
	if p.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("SHA256 is not the digest of Combined()")
	}
	if !bytes.HasPrefix(p.KeyPEM, []byte("-----BEGIN PRIVATE KEY-----\n")) {
		t.Errorf("KeyPEM is not PKCS#8: %.40s", p.KeyPEM)
	}
	if _, err := tls.X509KeyPair(p.Combined(), p.Combined()); err != nil {
		t.Errorf("Combined() does not load as a key pair: %v", err)
	}
}

func TestParseExpiredIsFlaggedNotRefused(t *testing.T) {
	cert, key, err := SelfSigned([]string{"old.example"}, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(cert, key)
	if err != nil {
		t.Fatalf("expired certificate refused: %v", err)
	}
	if !p.Expired() || p.ExpiredAt(p.NotAfter.Add(-time.Minute)) {
		t.Fatalf("Expired() = %v, ExpiredAt(before NotAfter) = %v", p.Expired(), p.ExpiredAt(p.NotAfter.Add(-time.Minute)))
	}
}

func TestParseChain(t *testing.T) {
	caKey, _ := ecKey(t)
	caTmpl := &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caPEM := issue(t, caTmpl, nil, caKey, nil)
	ca, _ := x509.ParseCertificate(pemDER(t, caPEM))
	leafKey, leafKeyPEM := ecKey(t)
	leafPEM := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "a.example"},
		DNSNames: []string{"a.example"}}, ca, leafKey, caKey)

	p, err := Parse(append(append([]byte{}, leafPEM...), caPEM...), leafKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(leafPEM) + string(caPEM); string(p.CertPEM) != want {
		t.Fatalf("chain not kept in order:\n%s", p.CertPEM)
	}
	// The leaf must come first: with the CA first, the key matches nothing.
	if _, err := Parse(append(append([]byte{}, caPEM...), leafPEM...), leafKeyPEM); err == nil ||
		!strings.Contains(err.Error(), "does not match") {
		t.Fatalf("chain with the CA first: error = %v, want a mismatch", err)
	}
}

func pemDER(t *testing.T, b []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil {
		t.Fatal("no PEM block")
	}
	return block.Bytes
}

// TestCanonicalForm: every spelling of the same certificate and key gives
// the same bytes and digest, so a Secret re-saved by another tool does not
// trigger a reload, and re-parsing the output is a fixed point.
func TestCanonicalForm(t *testing.T) {
	ecPriv, _ := ecKey(t)
	cert := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "a.example"}, DNSNames: []string{"a.example"}},
		nil, ecPriv, nil)
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(ecPriv)
	sec1, _ := x509.MarshalECPrivateKey(ecPriv)
	key := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})

	want, err := Parse(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(want.CertPEM, want.KeyPEM)
	if err != nil || !bytes.Equal(again.Combined(), want.Combined()) || again.SHA256 != want.SHA256 {
		t.Fatalf("re-parsing the canonical form changed it (err %v)", err)
	}
	variants := map[string][2][]byte{
		"CRLF":              {crlf(cert), crlf(key)},
		"surrounding space": {append(append([]byte("\n\n"), cert...), "\n\n"...), append([]byte("\t\n"), key...)},
		"76-column lines":   {rewrap(t, cert, 76), rewrap(t, key, 76)},
		"SEC1 EC key":       {cert, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})},
	}
	for name, v := range variants {
		got, err := Parse(v[0], v[1])
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got.Combined(), want.Combined()) || got.SHA256 != want.SHA256 {
			t.Errorf("%s: canonical form differs", name)
		}
	}
}

func TestCanonicalFormRSA(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "r.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: future}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	p1, err1 := Parse(cert, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}))
	p8, err8 := Parse(cert, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}))
	if err1 != nil || err8 != nil {
		t.Fatalf("PKCS#1: %v; PKCS#8: %v", err1, err8)
	}
	if p1.SHA256 != p8.SHA256 {
		t.Fatal("PKCS#1 and PKCS#8 spellings of one key give different canonical forms")
	}
}

func crlf(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }

// rewrap re-encodes PEM with base64 lines of n columns instead of 64.
func rewrap(t *testing.T, b []byte, n int) []byte {
	t.Helper()
	block, _ := pem.Decode(b)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	body := strings.Join(lines[1:len(lines)-1], "")
	var out strings.Builder
	out.WriteString("-----BEGIN " + block.Type + "-----\n")
	for len(body) > n {
		out.WriteString(body[:n] + "\n")
		body = body[n:]
	}
	out.WriteString(body + "\n-----END " + block.Type + "-----\n")
	return []byte(out.String())
}

// openssl ecparam -genkey writes the curve parameters before the key; real
// Secrets carry it, so it is accepted and left out of the canonical form.
func TestParseAcceptsECParametersBeforeKey(t *testing.T) {
	cert, key := selfSigned(t, "a.example")
	params := []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n")
	p, err := Parse(cert, append(params, key...))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(p.Combined(), []byte("EC PARAMETERS")) {
		t.Error("EC PARAMETERS reached the canonical output")
	}
}
