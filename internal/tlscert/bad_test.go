package tlscert

import (
	"bytes"
	"crypto/x509"
	"crypto/x509/pkix"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseRefuses covers bad TLS Secrets and the PEM strictness rules.
func TestParseRefuses(t *testing.T) {
	cert, key := selfSigned(t, "a.example")
	otherCert, otherKey := selfSigned(t, "b.example")
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	bad := []byte("-----BEGIN CERTIFICATE-----\n!!not base64!!\n-----END CERTIFICATE-----\n")
	huge := bytes.Repeat([]byte("A"), 10<<20)
	nulCN, nulCNKey := crafted(t, "a\x00.evil.example", nil)
	nulSAN, nulSANKey := crafted(t, "ok.example", []string{"a.example\x00.evil.example"})
	ctlSAN, ctlSANKey := crafted(t, "ok.example", []string{"a\x01.example"})
	delCN, delCNKey := crafted(t, "a\x7f.example", nil)

	tests := []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"non-PEM cert", []byte("hello, world"), key, "tls.crt: bytes at offset 0 are not a well-formed PEM block"},
		{"non-PEM key", cert, []byte{0x30, 0x82, 0x01}, "tls.key: bytes at offset 0 are not a well-formed PEM block"},
		{"empty cert", nil, key, "tls.crt: empty"},
		{"empty key", cert, []byte{}, "tls.key: empty"},
		{"text before", cat([]byte("subject=CN=a\n"), cert), key, "tls.crt: bytes at offset 0 are not"},
		{"trailing text after cert", cat(cert, []byte("trailing")), key, "tls.crt: bytes at offset"},
		{"trailing text after key", cert, cat(key, []byte("# comment\n")), "tls.key: bytes at offset"},
		{"unclosed second BEGIN", cat(cert, []byte("-----BEGIN CERTIFICATE-----\nMIIB\n")), key, "tls.crt: bytes at offset"},
		{"malformed block pem.Decode would skip", cat(bad, cert), key, "tls.crt: bytes at offset 0"},
		{"garbage on END line", bytes.Replace(cert, []byte("END CERTIFICATE-----\n"), []byte("END CERTIFICATE----- x\n"), 1),
			key, "tls.crt: bytes at offset 0"},
		{"second key block", cert, cat(key, key), `tls.key: want exactly one PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block, found "PRIVATE KEY", "PRIVATE KEY"`},
		{"key in tls.crt", cat(cert, key), key, `tls.crt: block 2 is "PRIVATE KEY"; only CERTIFICATE blocks are allowed`},
		{"cert in tls.key", cert, cert, `tls.key: want exactly one PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block, found "CERTIFICATE"`},
		{"unknown block", cat(cert, []byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n")), key, `block 2 is "X509 CRL"`},
		{"EC PARAMETERS after key", cert, cat(key, []byte("-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n")),
			`found "PRIVATE KEY", "EC PARAMETERS"`},
		{"encrypted key", cert, bytes.Replace(key, []byte("KEY-----\n"), []byte("KEY-----\nProc-Type: 4,ENCRYPTED\n\n"), 1),
			"tls.key: PEM block \"PRIVATE KEY\" has headers"},
		{"not a certificate", []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), key, "tls.crt: certificate 1: x509:"},
		{"key of another certificate", cert, otherKey, "tls.key does not match the certificate in tls.crt"},
		{"certificate of another key", otherCert, key, "tls.key does not match the certificate in tls.crt"},
		{"NUL in CN", nulCN, nulCNKey, "tls.crt: subject common name: control byte 0x00 at offset 1"},
		{"NUL in SAN", nulSAN, nulSANKey, "tls.crt: DNS name 1 in subjectAltName: control byte 0x00 at offset 9"},
		{"control byte in SAN", ctlSAN, ctlSANKey, "control byte 0x01"},
		{"DEL in CN", delCN, delCNKey, "control byte 0x7f"},
		{"10 MB cert", huge, key, "tls.crt: 10485760 bytes, more than the 1048576 byte limit"},
		{"10 MB key", cert, huge, "tls.key: 10485760 bytes, more than the 1048576 byte limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.cert, tc.key)
			if err == nil {
				t.Fatalf("accepted (%d certificate bytes)", len(p.CertPEM))
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %q\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

func crafted(t *testing.T, cn string, dnsNames []string) (cert, key []byte) {
	t.Helper()
	k, keyPEM := ecKey(t)
	return issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames}, nil, k, nil), keyPEM
}

func TestCheckNameUTF8(t *testing.T) {
	if err := checkName("b\xffad.example"); err == nil || err.Error() != "invalid UTF-8" {
		t.Fatalf("checkName(invalid UTF-8) = %v", err)
	}
	if err := checkName("bücher.example"); err != nil {
		t.Fatalf("checkName(valid UTF-8) = %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	cert, key := selfSigned(t, "a.example")
	p, err := Parse(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, p.Combined()) {
		t.Fatal("file content is not Combined()")
	}
	info, _ := os.Stat(path)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v, want 0600", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("folder holds %d entries, want only cert.pem (temporary file left behind?)", len(entries))
	}
	if err := WriteFile(filepath.Join(dir, "missing", "cert.pem"), p); err == nil {
		t.Fatal("WriteFile into a missing folder succeeded")
	}
}

func TestSelfSigned(t *testing.T) {
	if _, _, err := SelfSigned(nil, future); err == nil {
		t.Fatal("SelfSigned without hosts succeeded")
	}
	cert, key, err := SelfSigned([]string{"a.example", "127.0.0.1"}, future)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Leaf.IPAddresses) != 1 || !p.CoversHost("127.0.0.1") || p.Leaf.NotBefore.After(time.Now()) {
		t.Fatalf("IPs %v, NotBefore %v", p.Leaf.IPAddresses, p.Leaf.NotBefore)
	}
}
