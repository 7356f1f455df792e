package tlscert

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
)

// OpenSSL's default security level on Debian 12 (and so HAProxy 2.6 there)
// is 2: 112 bits of security. HAProxy refuses a whole configuration when
// one certificate falls below it, so pier refuses such an entry in Go
// first, and only that entry is dropped (otherwise one tenant's weak key
// would stop every load balancer's reload). Measured with `haproxy -c`
// (2.6.12, OpenSSL 3.0.19):
//
//   - an RSA key under 2048 bits, in the leaf or in a chain certificate:
//     refused ("unable to load SSL certificate / chain certificate");
//   - a certificate signed with SHA-1 or MD5 by another certificate:
//     refused; a self-signed one is not checked (OpenSSL skips the
//     signature of self-signed certificates);
//   - P-192: refused (Go cannot parse it anyway); P-224, P-256,
//     secp256k1, Ed25519 and Ed448: accepted.
//
// pier is stricter in one place: DSA keys, which OpenSSL takes from 2048
// bits, are refused.
const (
	minRSABits = 2048
	minECBits  = 224
)

// checkPolicy applies that policy to a parsed chain, leaf first.
func checkPolicy(chain []*x509.Certificate) error {
	for i, c := range chain {
		what := "the certificate"
		if i > 0 {
			what = fmt.Sprintf("chain certificate %d", i+1)
		}
		if err := checkKeySize(c); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if weakSignature(c.SignatureAlgorithm) && !isSelfSigned(c) {
			return fmt.Errorf("%s is signed with %s, which OpenSSL refuses (security level 2); reissue it with SHA-256",
				what, c.SignatureAlgorithm)
		}
	}
	return nil
}

func checkKeySize(c *x509.Certificate) error {
	if c.PublicKeyAlgorithm == x509.DSA {
		// OpenSSL takes DSA keys of 2048 bits and more; Go only parses
		// them through a deprecated package, and no CA issues them.
		return errors.New("DSA key; use RSA (2048 bits or more), ECDSA or Ed25519")
	}
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < minRSABits {
			return fmt.Errorf("RSA key of %d bits; OpenSSL (security level 2) needs at least %d", bits, minRSABits)
		}
	case *ecdsa.PublicKey:
		if bits := k.Curve.Params().BitSize; bits < minECBits {
			return fmt.Errorf("EC key on a %d-bit curve; OpenSSL (security level 2) needs at least %d", bits, minECBits)
		}
	}
	return nil
}

func weakSignature(a x509.SignatureAlgorithm) bool {
	switch a {
	case x509.MD2WithRSA, x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1:
		return true
	}
	return false
}

// isSelfSigned follows OpenSSL's EXFLAG_SS: the issuer is the subject, the
// authority key id (if any) is the subject key id, and the key usage (if
// any) allows signing certificates. The signature itself is not checked.
func isSelfSigned(c *x509.Certificate) bool {
	if !bytes.Equal(c.RawIssuer, c.RawSubject) {
		return false
	}
	if len(c.AuthorityKeyId) > 0 && len(c.SubjectKeyId) > 0 && !bytes.Equal(c.AuthorityKeyId, c.SubjectKeyId) {
		return false
	}
	return c.KeyUsage == 0 || c.KeyUsage&x509.KeyUsageCertSign != 0
}
