package translate

import (
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// proxySSLSettings are ingress-nginx's proxy-ssl-* annotations: how the
// pool's TLS to its members is checked (backend-protocol HTTPS, GRPCS).
type proxySSLSettings struct {
	set        bool   // any of them was given
	verify     bool   // proxy-ssl-verify: on
	serverName bool   // proxy-ssl-server-name: on
	secret     string // proxy-ssl-secret as written
	name       string // proxy-ssl-name
	// resolved is the pools' UpstreamTLS once the Secret is read; the
	// default name is filled per pool (applyProtocol).
	resolved *model.UpstreamTLS
}

// proxySSLNames are the annotations of the family, for warnings.
var proxySSLNames = []string{"proxy-ssl-secret", "proxy-ssl-verify", "proxy-ssl-name", "proxy-ssl-server-name"}

// parseOnOff accepts nginx's "on" and "off", as ingress-nginx checks
// proxy-ssl-verify and proxy-ssl-server-name (^(on|off)$).
func parseOnOff(what, v string) (bool, error) {
	val, err := encode.Enum(v, "on", "off")
	if err != nil {
		return false, fmt.Errorf("%s: %w", what, err)
	}
	return val.String() == "on", nil
}

// parseProxySSLName accepts a host name (lowercase DNS, no wildcard, no
// port): it is what the member's certificate must carry and the SNI sent.
func parseProxySSLName(v string) (string, error) {
	h, err := encode.Host(v)
	if err != nil {
		return "", fmt.Errorf("proxy-ssl-name: %w", err)
	}
	return h.String(), nil
}

// parseProxySSLSecret accepts "name" or "namespace/name" (parseObjectName).
func parseProxySSLSecret(v string) (string, error) { return parseObjectName("proxy-ssl-secret", v) }

// tlsProtocol: the pool speaks TLS to its members.
func tlsProtocol(p model.BackendProtocol) bool {
	return p == model.BackendHTTPS || p == model.BackendGRPCS
}

// proxySSLIssues warns that proxy-ssl-* do nothing without TLS to the
// members, as in ingress-nginx (nginx's proxy_ssl_* apply to https://
// upstreams only).
func proxySSLIssues(s ingressSettings, ann map[string]string) []annotationIssue {
	if !s.proxySSL.set || tlsProtocol(s.backendProtocol) {
		return nil
	}
	for _, n := range proxySSLNames {
		if k := annotation.KeyOf(ann, n); ann[k] != "" {
			return []annotationIssue{{key: k, message: "proxy-ssl-* apply to backend-protocol HTTPS or GRPCS only, ignored"}}
		}
	}
	return nil
}

// resolveProxySSL reads proxy-ssl-secret from the snapshot and records
// the digests of its CA and client certificate; the agent serves them
// only while they still hash to these. It returns the annotation key to
// blame and why, or "" when the Ingress may be served.
func (p *parsedIngress) resolveProxySSL(x *index, opts Options, problems *[]model.Problem) (string, error) {
	ps := &p.settings.proxySSL
	ann := p.ing.Annotations
	if !ps.set || !tlsProtocol(p.settings.backendProtocol) {
		return "", nil
	}
	u := &model.UpstreamTLS{Verify: ps.verify, SNI: ps.serverName, Name: ps.name}
	if ps.secret == "" {
		if ps.verify {
			return annotation.KeyOf(ann, "proxy-ssl-verify"), errors.New("proxy-ssl-verify on needs proxy-ssl-secret, the Secret holding ca.crt")
		}
		ps.resolved = u
		return "", nil
	}
	key := annotation.KeyOf(ann, "proxy-ssl-secret")
	ns, name, ok := annotation.ProxySSLSecret(p.ing)
	if !ok {
		return key, fmt.Errorf("proxy-ssl-secret %s: Secrets of other namespaces cannot be referenced", quoteForMessage(ps.secret))
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
	ps.resolved = u
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

// proxySSLDifference is how proxy-ssl-verify differs from ingress-nginx.
const proxySSLDifference = "per Service port, with backend-protocol HTTPS or GRPCS (ignored with a warning otherwise): on checks the member's chain against ca.crt " +
	"and its name against proxy-ssl-name (default <service>.<namespace>.svc), any chain length (proxy-ssl-verify-depth is not supported); " +
	"a member that fails gets no request and the client 503; on without proxy-ssl-secret refuses the Ingress"
