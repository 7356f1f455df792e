// Package tlscert parses the material of kubernetes.io/tls Secrets in Go
// before any of it reaches HAProxy: strict PEM, the
// key must match the certificate, names must be free of control bytes,
// and what is written is a canonical re-serialisation, never the Secret's
// bytes.
package tlscert

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxInputSize bounds each of tls.crt and tls.key. A long chain is a few
// tens of KiB; the limit only keeps a hostile Secret from costing memory
// and CPU.
const MaxInputSize = 1 << 20

// Pair is a parsed, validated certificate chain and private key.
type Pair struct {
	// CertPEM is the chain, leaf first, and KeyPEM the key as PKCS#8, both
	// re-encoded from the parsed DER.
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
	// SHA256 is the hex digest of Combined(): what the agent compares
	// with model.Certificate.SHA256 before it serves a file.
	SHA256   string
	NotAfter time.Time
	DNSNames []string
}

var (
	pemBegin = []byte("-----BEGIN ")
	keyTypes = map[string]bool{"PRIVATE KEY": true, "RSA PRIVATE KEY": true, "EC PRIVATE KEY": true}
)

// Parse validates tls.crt and tls.key. An expired certificate is not an
// error (see Expired): refusing it would turn a renewal delay into an
// outage of every host on it.
func Parse(certPEM, keyPEM []byte) (*Pair, error) {
	chain, err := parseChain(certPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	key, err := parseKey(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tls.key: %w", err)
	}
	if err := checkPolicy(chain); err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	leaf := chain[0]
	if err := checkNames(leaf); err != nil {
		return nil, fmt.Errorf("tls.crt: %w", err)
	}
	var certOut bytes.Buffer
	for _, c := range chain {
		certOut.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("tls.key: re-encode as PKCS#8: %w", err)
	}
	p := &Pair{
		CertPEM:  certOut.Bytes(),
		KeyPEM:   pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}),
		Leaf:     leaf,
		NotAfter: leaf.NotAfter,
		DNSNames: append([]string(nil), leaf.DNSNames...),
	}
	// Checked on the canonical bytes: they are what HAProxy will load.
	if _, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM); err != nil {
		return nil, fmt.Errorf("tls.key does not match the certificate in tls.crt: %w", err)
	}
	sum := sha256.Sum256(p.Combined())
	p.SHA256 = hex.EncodeToString(sum[:])
	return p, nil
}

// blocks splits data into PEM blocks and refuses anything else: text
// before, between or after blocks, blocks with headers (encrypted keys),
// and malformed blocks, which encoding/pem would silently skip.
func blocks(data []byte) ([]*pem.Block, error) {
	if len(data) == 0 {
		return nil, errors.New("empty")
	}
	if len(data) > MaxInputSize {
		return nil, fmt.Errorf("%d bytes, more than the %d byte limit", len(data), MaxInputSize)
	}
	var out []*pem.Block
	rest := data
	for len(bytes.TrimSpace(rest)) > 0 {
		offset := len(data) - len(rest)
		block, next := pem.Decode(rest)
		consumed := rest[:len(rest)-len(next)]
		if block == nil || !bytes.HasPrefix(bytes.TrimLeft(consumed, " \t\r\n"), pemBegin) ||
			bytes.Count(consumed, pemBegin) != 1 {
			return nil, fmt.Errorf("bytes at offset %d are not a well-formed PEM block", offset)
		}
		if len(block.Headers) > 0 {
			return nil, fmt.Errorf("PEM block %q has headers (encrypted keys are not supported)", block.Type)
		}
		out = append(out, block)
		rest = next
	}
	return out, nil
}

func parseChain(data []byte) ([]*x509.Certificate, error) {
	bs, err := blocks(data)
	if err != nil {
		return nil, err
	}
	chain := make([]*x509.Certificate, 0, len(bs))
	for i, b := range bs {
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("block %d is %q; only CERTIFICATE blocks are allowed (the key belongs in tls.key)",
				i+1, b.Type)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i+1, err)
		}
		chain = append(chain, c)
	}
	return chain, nil
}

func parseKey(data []byte) (crypto.Signer, error) {
	bs, err := blocks(data)
	if err != nil {
		return nil, err
	}
	// `openssl ecparam -genkey` writes the curve as an EC PARAMETERS block
	// before the key; the key names its curve itself, so the block is
	// redundant and dropped (it never reaches HAProxy: output is canonical).
	if len(bs) == 2 && bs[0].Type == "EC PARAMETERS" {
		bs = bs[1:]
	}
	if len(bs) != 1 || !keyTypes[bs[0].Type] {
		types := make([]string, len(bs))
		for i, b := range bs {
			types[i] = fmt.Sprintf("%q", b.Type)
		}
		return nil, fmt.Errorf("want exactly one PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block, found %s",
			strings.Join(types, ", "))
	}
	b := bs[0]
	var key any
	switch b.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", b.Type, err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported private key type %T", key)
	}
	return signer, nil
}

// checkNames refuses control bytes and invalid UTF-8 in the names that end
// up in logs, Events and SNI matching: a NUL in a certificate name is
// a known way to make two programs disagree about who a certificate is for.
func checkNames(c *x509.Certificate) error {
	if err := checkName(c.Subject.CommonName); err != nil {
		return fmt.Errorf("subject common name: %w", err)
	}
	for i, n := range c.DNSNames {
		if err := checkName(n); err != nil {
			return fmt.Errorf("DNS name %d in subjectAltName: %w", i+1, err)
		}
	}
	return nil
}

func checkName(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("invalid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return fmt.Errorf("control byte 0x%02x at offset %d", s[i], i)
		}
	}
	return nil
}

// Combined is the chain followed by the key: the file HAProxy's crt
// keyword loads.
func (p *Pair) Combined() []byte {
	out := make([]byte, 0, len(p.CertPEM)+len(p.KeyPEM))
	return append(append(out, p.CertPEM...), p.KeyPEM...)
}

// Expired reports whether the leaf is past its NotAfter now. Callers warn
// (Event, metric) and keep serving it.
func (p *Pair) Expired() bool { return p.ExpiredAt(time.Now()) }

// ExpiredAt reports whether the leaf is past its NotAfter at t.
func (p *Pair) ExpiredAt(t time.Time) bool { return t.After(p.NotAfter) }

// CoversHost reports whether the leaf is valid for host by its DNS SANs
// (the common name is ignored, as by Go and browsers), so translation can
// warn about a TLS host its Secret does not cover.
func (p *Pair) CoversHost(host string) bool { return p.Leaf.VerifyHostname(host) == nil }
