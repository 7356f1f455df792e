package badinput

import (
	"bytes"
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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
)

// pemPair is a certificate and its key as a Secret would hold them; the
// key is SEC1 ("EC PRIVATE KEY"), which pier must re-encode as PKCS#8.
type pemPair struct {
	cert, key []byte
	der       []byte
}

func makeCert(t *testing.T, cn string, sans []string, notAfter time.Time) pemPair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: sans,
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	sec1, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pemPair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1}), der: der}
}

// fingerprint is a base64 line from the middle of a PEM block: found on
// disk, it means these bytes (or their canonical re-encoding, which has
// the same line layout) were written there.
func fingerprint(p []byte) string {
	lines := strings.Split(strings.TrimSpace(string(p)), "\n")
	return lines[len(lines)/2]
}

const junk = "tlsjunk-7f3a" // in every invalid Secret; must reach no file

type tlsCase struct {
	name       string
	cert, key  []byte
	ownFile    bool   // the Secret goes in a file of its own
	reason     string // the Warning expected
	fingerprts []string
}

func (b *bench) tlsCases(t *testing.T) []tlsCase {
	host, day := "attacker.example", 24*time.Hour
	good := makeCert(t, host, []string{host}, time.Now().Add(30*day))
	other := makeCert(t, host, []string{host}, time.Now().Add(30*day))
	nulCN := makeCert(t, host+"\x00."+junk+".example", []string{host}, time.Now().Add(30*day))
	nulSAN := makeCert(t, host, []string{host + "\x00." + junk + ".example"}, time.Now().Add(30*day))
	expired := makeCert(t, host, []string{host}, time.Now().Add(-day))
	fp := []string{fingerprint(good.cert), fingerprint(good.key)}
	return []tlsCase{
		{"non_PEM", []byte(junk + " not a certificate"), []byte(junk + " not a key"), false, "InvalidTLS", nil},
		{"trailing_text", append(append([]byte{}, good.cert...), junk+" trailing text\n"...), good.key, false, "InvalidTLS", fp},
		{"second_BEGIN", append([]byte("-----BEGIN CERTIFICATE-----\n"+junk+"\n"), good.cert...), good.key, false, "InvalidTLS", fp},
		{"key_mismatch", good.cert, other.key, false, "InvalidTLS", append(fp, fingerprint(other.key))},
		{"NUL_in_CN", nulCN.cert, nulCN.key, false, "InvalidTLS", []string{fingerprint(nulCN.cert), fingerprint(nulCN.key)}},
		{"NUL_in_SAN", nulSAN.cert, nulSAN.key, false, "InvalidTLS", []string{fingerprint(nulSAN.cert), fingerprint(nulSAN.key)}},
		{"2MiB_over_tlscert_limit", append(append([]byte{}, good.cert...), strings.Repeat(junk, 2<<20/len(junk))...), good.key, false, "InvalidTLS", fp},
		{"10MB_secret", append(append([]byte{}, good.cert...), strings.Repeat(junk, 10_000_000/len(junk))...), good.key, true, "InvalidTLS", fp},
		{"expired", expired.cert, expired.key, false, "ExpiredCertificate", []string{fingerprint(expired.key)}},
	}
}

// runTLS: a bad Secret costs its TLS entry only, with a Warning:
// HTTP keeps serving, no HTTPS listener, nothing of the Secret on disk.
// An expired certificate is served, re-encoded, with a Warning.
func (b *bench) runTLS(t *testing.T) {
	for i, c := range b.tlsCases(t) {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-tls-%d", i)
			ing, a := b.attacker(ns)
			ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"attacker.example"}, SecretName: "cert"}}
			// The route is checked over HTTP: with a served certificate
			// (expired) ssl-redirect, on by default as in ingress-nginx,
			// would answer 308 instead.
			if ing.Annotations == nil {
				ing.Annotations = map[string]string{}
			}
			ing.Annotations["nginx.ingress.kubernetes.io/ssl-redirect"] = "false"
			sec := tlsSecret(ns, "cert", c.cert, c.key)
			if c.ownFile {
				a.extra = list(t, sec)
			} else {
				a.objs = append(a.objs, sec)
			}
			before := b.reloads()
			got, vip := b.launchServed(t, a, "evil")
			pr := findProblem(got.Problems, model.SeverityWarning, c.reason)
			if pr == nil || pr.Field != "spec.tls[0].secretName" {
				t.Errorf("want a %s warning on spec.tls[0].secretName; problems: %s", c.reason, problemList(got.Problems))
			} else {
				t.Logf("%s: %s", pr.Reason, pr.Message)
			}
			checkProblemText(t, got.Problems, "")
			b.expectRoute(t, vip, "attacker.example", "/ok", attackerEcho)
			if c.reason == "ExpiredCertificate" {
				b.checkServesCert(t, vip, c.cert)
			} else {
				b.checkNoHTTPS(t, vip)
			}
			b.checkIsolated(t, before, 1, append(servedMarkers, junk))
			b.checkMarkers(t, append(c.fingerprts, junk), true)
		})
	}
}

// checkNoHTTPS checks that the attacker's load balancer has no
// certificate file and no HTTPS listener.
func (b *bench) checkNoHTTPS(t *testing.T, vip string) {
	t.Helper()
	for _, dir := range b.otherLBDirs(t) {
		if des, _ := os.ReadDir(filepath.Join(dir, "certs")); len(des) != 0 {
			t.Errorf("%s/certs holds %v: an ignored TLS entry wrote a certificate", dir, des)
		}
	}
	addr := net.JoinHostPort(vip, strconv.Itoa(b.p.HTTPSPort))
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s accepts connections: an HTTPS listener exists without a valid certificate", addr)
	}
}

// checkServesCert checks that HTTPS on vip presents certPEM and routes,
// and that the file on disk is pier's PKCS#8 re-encoding.
func (b *bench) checkServesCert(t *testing.T, vip string, certPEM []byte) {
	t.Helper()
	blk, _ := pem.Decode(certPEM)
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{
		ServerName: "attacker.example", InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if !bytes.Equal(cs.PeerCertificates[0].Raw, blk.Bytes) {
				return fmt.Errorf("served another certificate: %s", cs.PeerCertificates[0].Subject)
			}
			return nil
		}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(vip, strconv.Itoa(b.p.HTTPSPort))+"/ok", nil)
	req.Host = "attacker.example"
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Errorf("HTTPS with the expired certificate: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("HTTPS /ok: status %d", resp.StatusCode)
		}
	}
	files := 0
	for _, dir := range b.otherLBDirs(t) {
		des, _ := os.ReadDir(filepath.Join(dir, "certs"))
		for _, de := range des {
			files++
			data, _ := os.ReadFile(filepath.Join(dir, "certs", de.Name()))
			if bytes.Contains(data, []byte("EC PRIVATE KEY")) || !bytes.Contains(data, []byte("BEGIN PRIVATE KEY")) {
				t.Errorf("%s is not pier's PKCS#8 re-encoding", de.Name())
			}
		}
	}
	if files != 1 {
		t.Errorf("want one certificate file, found %d", files)
	}
}

// otherLBDirs are the load balancer folders besides the victim's.
func (b *bench) otherLBDirs(t *testing.T) []string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(b.state, "haproxy", "*"))
	var out []string
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() && d != filepath.Dir(b.victimConf) && !strings.HasPrefix(filepath.Base(d), "shard-") && filepath.Base(d) != "landing" {
			out = append(out, d)
		}
	}
	return out
}

// runCrossNamespace: a Secret of another namespace is never used,
// by "ns/name" in secretName (the API server refuses it; a manifest file
// does not) or by an annotation, which pier does not have.
func (b *bench) runCrossNamespace(t *testing.T) {
	valid := makeCert(t, "attacker.example", []string{"attacker.example"}, time.Now().Add(24*time.Hour))
	cases := []struct{ name, reason, field, secretName, annotation string }{
		{"secretName_other-ns/secret", "InvalidTLS", "spec.tls[0].secretName", "other-ns/secret", ""},
		{"annotation_tls-secret", "IgnoredAnnotation", "metadata.annotations[pier.dev/tls-secret]", "", "other-ns/secret"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-xns-%d", i)
			ing, a := b.attacker(ns)
			if c.secretName != "" {
				ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"attacker.example"}, SecretName: c.secretName}}
			}
			if c.annotation != "" {
				ing.Annotations = map[string]string{"pier.dev/tls-secret": c.annotation}
			}
			a.objs = append(a.objs, tlsSecret("other-ns", "secret", valid.cert, valid.key))
			before := b.reloads()
			got, vip := b.launchServed(t, a, "evil")
			if pr := findProblem(got.Problems, model.SeverityWarning, c.reason); pr == nil || pr.Field != c.field {
				t.Errorf("want a %s warning on %s; problems: %s", c.reason, c.field, problemList(got.Problems))
			}
			checkProblemText(t, got.Problems, "")
			b.expectRoute(t, vip, "attacker.example", "/ok", attackerEcho)
			b.checkNoHTTPS(t, vip)
			b.checkIsolated(t, before, 1, servedMarkers)
			b.checkMarkers(t, []string{fingerprint(valid.cert), fingerprint(valid.key)}, true)
		})
	}
}
