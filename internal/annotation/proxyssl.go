package annotation

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// ProxySSL are ingress-nginx's proxy-ssl-* annotations: how the
// pool's TLS to its members is checked (backend-protocol HTTPS, GRPCS).
type ProxySSL struct {
	Set        bool   // any of them was given
	Verify     bool   // proxy-ssl-verify: on
	ServerName bool   // proxy-ssl-server-name: on
	Secret     string // proxy-ssl-secret as written
	Name       string // proxy-ssl-name
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

// TLSProtocol is whether a pool of protocol p speaks TLS to its members:
// what proxy-ssl-* apply to.
func TLSProtocol(p model.BackendProtocol) bool {
	return p == model.BackendHTTPS || p == model.BackendGRPCS
}

// proxySSLIssues warns that proxy-ssl-* do nothing without TLS to the
// members, as in ingress-nginx (nginx's proxy_ssl_* apply to https://
// upstreams only).
func proxySSLIssues(s Settings, ann map[string]string) []Issue {
	if !s.ProxySSL.Set || TLSProtocol(s.BackendProtocol) {
		return nil
	}
	for _, n := range proxySSLNames {
		if k := KeyOf(ann, n); ann[k] != "" {
			return []Issue{{Key: k, Message: "proxy-ssl-* apply to backend-protocol HTTPS or GRPCS only, ignored"}}
		}
	}
	return nil
}

// proxySSLDifference is how proxy-ssl-verify differs from ingress-nginx.
const proxySSLDifference = "per Service port, with backend-protocol HTTPS or GRPCS (ignored with a warning otherwise): on checks the member's chain against ca.crt " +
	"and its name against proxy-ssl-name (default <service>.<namespace>.svc), any chain length (proxy-ssl-verify-depth is not supported); " +
	"a member that fails gets no request and the client 503; on without proxy-ssl-secret refuses the Ingress"
