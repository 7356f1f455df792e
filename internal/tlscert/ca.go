package tlscert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// maxCAs bounds a ca.crt: a trust bundle for one Service's members is a
// few certificates; the public roots are about 150.
const maxCAs = 256

// CABundle is a parsed ca.crt (ingress-nginx's proxy-ssl-secret): the
// certificates a member's chain must lead to.
type CABundle struct {
	// PEM is the certificates re-encoded from their DER, in the order
	// given: what HAProxy's ca-file loads.
	PEM []byte
	// SHA256 is the hex digest of PEM.
	SHA256 string
	// NotAfter is the earliest expiry among the certificates: past it,
	// a chain through that one fails verification.
	NotAfter time.Time
}

// ParseCA validates a ca.crt: CERTIFICATE blocks only, each parsed by Go
// and within OpenSSL's security level 2 (a weaker one makes HAProxy
// refuse the whole configuration). Nothing of the Secret's bytes is
// copied: what is written is re-encoded.
func ParseCA(data []byte) (*CABundle, error) {
	chain, err := parseChain(data)
	if err != nil {
		return nil, err
	}
	if len(chain) > maxCAs {
		return nil, fmt.Errorf("%d certificates, the limit is %d", len(chain), maxCAs)
	}
	var out bytes.Buffer
	var notAfter time.Time
	for i, c := range chain {
		if notAfter.IsZero() || c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
		if err := checkKeySize(c); err != nil {
			return nil, fmt.Errorf("certificate %d: %w", i+1, err)
		}
		out.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
	}
	if out.Len() == 0 {
		return nil, errors.New("no certificate")
	}
	sum := sha256.Sum256(out.Bytes())
	return &CABundle{PEM: out.Bytes(), SHA256: hex.EncodeToString(sum[:]), NotAfter: notAfter}, nil
}

// JoinCA parses several ca.crt as one bundle, in order (a Gateway's
// frontend caCertificateRefs): a newline between parts, so that one not
// ending in one does not glue its last line to the next part's first.
func JoinCA(parts ...[]byte) (*CABundle, error) {
	return ParseCA(bytes.Join(parts, []byte("\n")))
}
