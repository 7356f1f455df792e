package translate

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// resolveProxySSL reads proxy-ssl-secret from the snapshot and records
// the digests of its CA and client certificate; the agent serves them
// only while they still hash to these. It returns the annotation key to
// blame and why, or "" when the Ingress may be served.
func (p *parsedIngress) resolveProxySSL(x *index, opts Options, problems *[]model.Problem) (string, error) {
	ps := &p.settings.ProxySSL
	ann := p.ing.Annotations
	if !ps.Set || !annotation.TLSProtocol(p.settings.BackendProtocol) {
		return "", nil
	}
	u := &model.UpstreamTLS{Verify: ps.Verify, SNI: ps.ServerName, Name: ps.Name}
	if ps.Secret == "" {
		if ps.Verify {
			return annotation.KeyOf(ann, "proxy-ssl-verify"), errors.New("proxy-ssl-verify on needs proxy-ssl-secret, the Secret holding ca.crt")
		}
		p.settings.upstreamTLS = u
		return "", nil
	}
	key := annotation.KeyOf(ann, "proxy-ssl-secret")
	ns, name, ok := annotation.ProxySSLSecret(p.ing)
	if !ok {
		return key, fmt.Errorf("proxy-ssl-secret %s: Secrets of other namespaces cannot be referenced", annotation.QuoteForMessage(ps.Secret))
	}
	sec := x.snap.Secret(ns, name)
	if sec == nil {
		return key, fmt.Errorf("secret %s/%s not found", ns, name)
	}
	expiry, err := readUpstreamSecret(u, sec.Data)
	if err != nil {
		return key, fmt.Errorf("secret %s/%s: %w", ns, name, err)
	}
	if !opts.Now.IsZero() && !expiry.IsZero() && expiry.Before(opts.Now) {
		*problems = append(*problems, warning(p.ing, "ExpiredCertificate", fieldForAnnotation(key),
			"a certificate of secret %s/%s expired at %s: members' handshakes will fail", ns, name, expiry.UTC().Format(time.RFC3339)))
	}
	if u.CASHA256 == "" && u.ClientSHA256 == "" {
		*problems = append(*problems, warning(p.ing, "IgnoredAnnotation", fieldForAnnotation(key),
			"secret %s/%s: with proxy-ssl-verify off only a client certificate (tls.crt and tls.key) is used, and there is none: nothing to do", ns, name))
	}
	u.Namespace, u.Secret = ns, name
	p.settings.upstreamTLS = u
	return "", nil
}

// readUpstreamSecret validates ca.crt (needed to verify, else unused, as
// nginx's proxy_ssl_trusted_certificate without proxy_ssl_verify) and the
// optional client pair tls.crt and tls.key, and records their digests.
// It returns the earliest expiry of what is used (zero for none).
func readUpstreamSecret(u *model.UpstreamTLS, data map[string][]byte) (time.Time, error) {
	var expiry time.Time
	earliest := func(t time.Time) {
		if expiry.IsZero() || t.Before(expiry) {
			expiry = t
		}
	}
	if ca, ok := data["ca.crt"]; ok && u.Verify {
		b, err := tlscert.ParseCA(ca)
		if err != nil {
			return expiry, fmt.Errorf("ca.crt: %w", err)
		}
		u.CASHA256 = b.SHA256
		earliest(b.NotAfter)
	}
	crt, hasCrt := data[corev1.TLSCertKey]
	key, hasKey := data[corev1.TLSPrivateKeyKey]
	if hasCrt || hasKey {
		pair, err := tlscert.Parse(crt, key)
		if err != nil {
			return expiry, fmt.Errorf("client certificate: %w", err)
		}
		u.ClientSHA256 = pair.SHA256
		earliest(pair.NotAfter)
	}
	switch {
	case u.Verify && u.CASHA256 == "":
		return expiry, errors.New("proxy-ssl-verify on needs the key ca.crt")
	}
	return expiry, nil
}

// defaultUpstreamName is the name checked and sent when proxy-ssl-name is
// not set: the Service's cluster DNS name. ingress-nginx uses nginx's
// $proxy_host, its internal upstream name, which no certificate carries.
func defaultUpstreamName(pool *model.Pool) string {
	return pool.Service + "." + pool.Namespace + ".svc"
}
