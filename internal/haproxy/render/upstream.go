package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// upstreamTLS replaces the server words of each pool with UpstreamTLS
// (ingress-nginx's proxy-ssl-*) once the folder is known, since the CA
// and client certificate files are named there:
//
//	ssl verify required ca-file <ca> verifyhost <name> [alpn h2] sni str(<name>) check-sni <name> crt <client>
//
// Without Verify the member stays unverified (verify none), as
// ingress-nginx's proxy-ssl-verify off. check-sni makes health checks
// send the same name, or a member that requires SNI fails them.
func upstreamTLS(v *view, at layout.LB) error {
	for i := range v.pools {
		pv := &v.pools[i]
		u := pv.upstream
		if u == (model.UpstreamTLS{}) {
			continue
		}
		words, err := upstreamWords(pv.proto, u, at)
		if err != nil {
			return fmt.Errorf("pool %s: upstream TLS: %w", encode.Printable(pv.id), err)
		}
		pv.protocol = words
	}
	return nil
}

func upstreamWords(proto model.BackendProtocol, u model.UpstreamTLS, at layout.LB) ([]encode.Word, error) {
	if proto != model.BackendHTTPS && proto != model.BackendGRPCS {
		return nil, fmt.Errorf("protocol %s is not TLS", encode.Printable(string(proto)))
	}
	var name encode.Word
	if u.Verify || u.SNI {
		h, err := encode.Host(u.Name)
		if err != nil {
			return nil, err
		}
		name = h.Word()
	}
	words := []encode.Word{encode.Lit("ssl"), encode.Lit("verify")}
	if u.Verify {
		ca, err := at.UpstreamCA(u.CASHA256)
		if err != nil {
			return nil, err
		}
		verify := name
		if u.VerifyHost != "" { // a BackendTLSPolicy's subjectAltName, checked instead of the SNI
			h, err := encode.Host(u.VerifyHost)
			if err != nil {
				return nil, err
			}
			verify = h.Word()
		}
		words = append(words, encode.Lit("required"), encode.Lit("ca-file"), encode.FilePath(ca), encode.Lit("verifyhost"), verify)
	} else {
		words = append(words, encode.Lit("none"))
	}
	if proto == model.BackendGRPCS {
		words = append(words, encode.Lit("alpn"), encode.Lit("h2"))
	}
	if u.SNI {
		sni, err := encode.SNIString(u.Name)
		if err != nil {
			return nil, err
		}
		words = append(words, encode.Lit("sni"), sni, encode.Lit("check-sni"), name)
	}
	if u.ClientSHA256 != "" {
		crt, err := at.UpstreamClient(u.ClientSHA256)
		if err != nil {
			return nil, err
		}
		words = append(words, encode.Lit("crt"), encode.FilePath(crt))
	}
	for _, w := range words {
		if err := w.Err(); err != nil {
			return nil, err
		}
	}
	return words, nil
}
