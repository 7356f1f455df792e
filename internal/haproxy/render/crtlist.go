package render

import (
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// CrtList renders the crt-list file that TLS listeners load: one line per
// certificate, "<Dir>/certs/<id>.pem <sni filter>...", with the
// certificate's hosts as SNI filters (wildcards allowed). HAProxy serves
// the first line to clients whose SNI matches nothing (or who send none).
//
// One file serves every TLS listener of the load balancer: certificates
// are taken listener by listener (by port), each once, in the listener's
// order. It returns nil when lb has no TLS listener.
func CrtList(lb *model.LoadBalancer, opts Options) ([]byte, error) {
	opts = opts.withDefaults()
	if err := opts.check(); err != nil {
		return nil, err
	}
	v, err := newView(lb, opts)
	if err != nil {
		return nil, fmt.Errorf("crt-list %s: %w", encode.Printable(uuidOf(lb)), err)
	}
	var out []byte
	seen := map[string]model.Certificate{}
	for _, l := range v.listeners {
		for _, cert := range l.certs {
			if prev, dup := seen[cert.ID]; dup {
				if prev.SHA256 != cert.SHA256 {
					return nil, fmt.Errorf("crt-list: certificate id %s used for two contents", encode.Printable(cert.ID))
				}
				continue
			}
			seen[cert.ID] = cert
			line, err := crtListLine(opts.Dir, cert)
			if err != nil {
				return nil, fmt.Errorf("crt-list: certificate %s: %w", encode.Printable(cert.ID), err)
			}
			out = append(out, line...)
		}
	}
	return out, nil
}

func crtListLine(dir string, cert model.Certificate) (string, error) {
	path, err := CertPath(dir, cert.ID)
	if err != nil {
		return "", err
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
	return encode.CrtListLine(encode.FilePath(path), filters...)
}
