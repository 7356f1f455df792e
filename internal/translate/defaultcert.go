package translate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// The default certificate (--default-certificate, ingress-nginx's
// --default-ssl-certificate) makes every Ingress's load balancer listen
// for HTTPS, as ingress-nginx's every server does: its routes are served
// there too, a client whose SNI matches none of the load balancer's own
// certificates gets the default one, and force-ssl-redirect on an
// Ingress without spec.tls sends clients to a port that answers.
//
// It is the operator's, not a tenant's: it is served to whoever asks on
// any load balancer, so it is listed first (the fallback) and matches no
// name of its own (render: "!*"), and a tenant's certificate for a name
// the default also covers still wins. Without one, a load balancer whose
// Ingresses have no usable spec.tls has no HTTPS listener, and an
// Ingress that forces the redirect there is warned: only a proxy in front
// of pier that ends TLS can serve the https:// it redirects to.

// defaultCert is the default certificate resolved for one translation:
// cert is nil when none is configured or it cannot be used, and why then
// says which, for the warnings of the Ingresses that need it.
type defaultCert struct {
	cert *model.Certificate
	why  string
}

// ParseDefaultCertificate checks --default-certificate's value: a Secret
// as namespace/name, both DNS labels and subdomain names as Kubernetes
// has them; "" is none.
func ParseDefaultCertificate(v string) error {
	if v == "" {
		return nil
	}
	ns, name, ok := strings.Cut(v, "/")
	if !ok || len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(name)) > 0 {
		return fmt.Errorf("want a Secret as namespace/name, got %s", annotation.QuoteForMessage(v))
	}
	return nil
}

// resolveDefaultCert reads opts.DefaultCertificate from the snapshot, as
// a spec.tls Secret is read (type, PEM, key matching the certificate).
func resolveDefaultCert(x *index, opts Options) defaultCert {
	ref := opts.DefaultCertificate
	if ref == "" {
		return defaultCert{why: "no spec.tls of its Ingresses is usable, and pier has no --default-certificate"}
	}
	if err := ParseDefaultCertificate(ref); err != nil {
		return defaultCert{why: "--default-certificate: " + err.Error()}
	}
	ns, name, _ := strings.Cut(ref, "/")
	cert, _, err := certificate(x.snap.Secret(ns, name), ns, name, nil)
	if err != nil {
		return defaultCert{why: fmt.Sprintf("no spec.tls of its Ingresses is usable, and --default-certificate %s cannot be used: %v", ref, err)}
	}
	// An ID of its own: a tenant of that namespace may name the same
	// Secret in spec.tls, for its hosts, as a certificate of its own.
	cert.ID, cert.Default = model.ID("default-cert", ns, name), true
	return defaultCert{cert: &cert}
}

// withDefault puts the default certificate, if any, first in certs.
func (d defaultCert) withDefault(certs []model.Certificate) []model.Certificate {
	if d.cert == nil {
		return certs
	}
	return append([]model.Certificate{*d.cert}, certs...)
}

// forceRedirectWarnings warns each Ingress of members that forces the
// HTTPS redirect on a load balancer without HTTPS of its own. The redirect
// stays: it is what ingress-nginx's force-ssl-redirect is for when TLS
// ends in front of the controller (a cloud load balancer), and pier skips
// it for a request whose X-Forwarded-Proto, from a --trusted-proxies
// client, already says https. Without such a proxy the client is sent to
// a port where nothing listens, and the warning says why and what to set.
func forceRedirectWarnings(members []*parsedIngress, lbName string, d defaultCert) []model.Problem {
	var out []model.Problem
	for _, p := range members {
		if p.settings.ForceSSLRedirect {
			out = append(out, warning(p.ing, "HTTPSNotServed", "metadata.annotations",
				"force-ssl-redirect: load balancer %s serves no HTTPS: %s. HTTP requests are still redirected to https://<host>/, "+
					"which only a proxy in front of pier that ends TLS can serve (--trusted-proxies, sending X-Forwarded-Proto: https); "+
					"otherwise give the Ingress a spec.tls or pier a --default-certificate", lbName, d.why))
		}
	}
	return out
}
