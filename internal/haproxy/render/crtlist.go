package render

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// crtList renders the crt-list file that TLS listeners load: one line
// per certificate (per 63 of its hosts), "<lb>/certs/<id>.pem <sni
// filter>...", with the certificate's hosts as SNI filters (wildcards
// allowed). HAProxy serves the first line to clients whose SNI matches
// nothing (or who send none).
//
// One file serves every TLS listener of the load balancer: certificates
// are taken listener by listener (by port), each once, in the listener's
// order; then the decrypt certificates (decrypt.go) likewise, after every
// HTTPS one, so that they never become the HTTPS binds' first line. A
// certificate met again with hosts not yet listed (one Secret on two
// listeners) gets lines for those too. It returns nil when lb has no TLS
// listener.
func crtList(v *view, at layout.LB) ([]byte, error) {
	var out []byte
	seen := map[string]model.Certificate{}
	listed := map[string]map[string]bool{}
	add := func(cert model.Certificate) error {
		if prev, dup := seen[cert.ID]; dup {
			if prev.SHA256 != cert.SHA256 {
				return fmt.Errorf("crt-list: certificate id %s used for two contents", encode.Printable(cert.ID))
			}
			var more []string
			for _, h := range cert.Hosts {
				if !listed[cert.ID][h] {
					listed[cert.ID][h] = true
					more = append(more, h)
				}
			}
			if len(more) == 0 || prev.Default {
				return nil
			}
			cert.Hosts = more
		} else {
			seen[cert.ID] = cert
			listed[cert.ID] = map[string]bool{}
			for _, h := range cert.Hosts {
				listed[cert.ID][h] = true
			}
		}
		if cert.Default && len(out) > 0 {
			return fmt.Errorf("crt-list: default certificate %s is not the first", encode.Printable(cert.ID))
		}
		lines, err := crtListLines(at, cert)
		if err != nil {
			return fmt.Errorf("crt-list: certificate %s: %w", encode.Printable(cert.ID), err)
		}
		out = append(out, lines...)
		return nil
	}
	for _, decrypt := range []bool{false, true} {
		for _, l := range v.listeners {
			certs := l.certs
			if decrypt {
				certs = l.decryptCerts
			}
			for _, cert := range certs {
				if err := add(cert); err != nil {
					return nil, err
				}
			}
		}
	}
	return out, nil
}

// crtListLines writes one certificate's lines. A certificate may carry
// more hosts than one line takes (a SAN certificate for 100 names):
// encode.CrtListLine refuses more than 63 filters, so the hosts are split
// over several lines naming the same file, which HAProxy loads once.
// The certificate's first line stays where it was, so the default
// certificate does not change.
func crtListLines(at layout.LB, cert model.Certificate) (string, error) {
	path, err := at.Cert(cert.ID, cert.SHA256)
	if err != nil {
		return "", err
	}
	if cert.Default {
		if len(cert.Hosts) > 0 {
			return "", fmt.Errorf("a default certificate names no host, this one %d", len(cert.Hosts))
		}
		return encode.CrtListDefaultLine(encode.FilePath(path))
	}
	filters := make([]encode.Word, 0, len(cert.Hosts))
	for _, h := range cert.Hosts {
		var v encode.Value
		var err error
		if strings.HasPrefix(h, "*") {
			v, err = encode.WildcardHost(h)
		} else {
			v, err = encode.Host(h)
		}
		if err != nil {
			return "", err
		}
		filters = append(filters, v.Word())
	}
	const perLine = encode.MaxLineArgs - 1 // the file name is a word too
	var out string
	for len(out) == 0 || len(filters) > 0 {
		n := min(len(filters), perLine)
		line, err := encode.CrtListLine(encode.FilePath(path), filters[:n]...)
		if err != nil {
			return "", err
		}
		out, filters = out+line, filters[n:]
	}
	return out, nil
}
