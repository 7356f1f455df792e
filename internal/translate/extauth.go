package translate

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxAuthHeaders bounds auth-response-headers (one rule each).
const maxAuthHeaders = 16

// extAuthSettings are auth-url and its companions.
type extAuthSettings struct {
	url     *authURL
	signin  string
	headers []string
	method  string
}

// authURL is auth-url read as a Service address:
// http://<service>.<namespace>.svc[.cluster.local][:port]/path.
type authURL struct {
	service, namespace, host, path string
	port                           int32
}

// parseAuthURL accepts an http URL to a Service by its cluster DNS name,
// with an optional port (80 by default) and a path of letters, digits
// and ._~/- (default "/"); no user info, query or fragment, in the form
// Go's net/url writes it. https is refused: pier does not yet speak TLS
// to the auth Service.
func parseAuthURL(v string) (*authURL, error) {
	bad := func(why string) (*authURL, error) {
		return nil, fmt.Errorf("auth-url %s: %s", quoteForMessage(v), why)
	}
	u, err := url.Parse(v)
	if err != nil || u.String() != v || u.Opaque != "" {
		return bad("not a URL in canonical form")
	}
	if u.Scheme != "http" {
		return bad("only http:// to a Service of the Ingress's namespace is supported (https is not yet)")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return bad("no user info, query or fragment")
	}
	host := strings.TrimSuffix(u.Hostname(), ".cluster.local")
	labels := strings.Split(host, ".")
	if len(labels) != 3 || labels[2] != "svc" {
		return bad("the host must be <service>.<namespace>.svc or <service>.<namespace>.svc.cluster.local")
	}
	if errs := validation.IsDNS1035Label(labels[0]); len(errs) > 0 {
		return bad("service: " + strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(labels[1]); len(errs) > 0 {
		return bad("namespace: " + strings.Join(errs, "; "))
	}
	a := &authURL{service: labels[0], namespace: labels[1], host: u.Hostname(), path: u.Path, port: 80}
	if p := u.Port(); p != "" {
		n, err := encode.Int(p, 1, 65535)
		if err != nil || strconv.Itoa(n) != p {
			return bad("port must be 1-65535")
		}
		a.port = int32(n)
	}
	if a.path == "" {
		a.path = "/"
	}
	if a.path, err = plainPath("auth-url path", a.path); err != nil {
		return nil, err
	}
	return a, nil
}

func parseAuthResponseHeaders(v string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(v, ",") {
		// The rule of the Gateway API header modifiers: the auth answer's
		// Content-Length, Transfer-Encoding, Connection or Host set on the
		// request would reframe or reroute it on its way to the backend.
		h, err := encode.ModifiableHeader(strings.Trim(part, " "))
		if err != nil {
			return nil, fmt.Errorf("auth-response-headers: %w", err)
		}
		for _, seen := range out {
			if strings.EqualFold(seen, h.String()) {
				return nil, fmt.Errorf("auth-response-headers: %s twice", quoteForMessage(h.String()))
			}
		}
		out = append(out, h.String())
	}
	if len(out) > maxAuthHeaders {
		return nil, fmt.Errorf("auth-response-headers: %d headers, at most %d", len(out), maxAuthHeaders)
	}
	return out, nil
}

func parseAuthMethod(v string) (string, error) {
	m, err := encode.Enum(v, "GET", "HEAD", "POST")
	if err != nil {
		return "", fmt.Errorf("auth-method: %w", err)
	}
	return m.String(), nil
}

// extAuthIssues: the companions do nothing without auth-url (an invalid
// one refuses the Ingress already).
func extAuthIssues(e extAuthSettings, ann map[string]string) []annotationIssue {
	if _, set := ann[keyOf(ann, "auth-url")]; e.url != nil || set {
		return nil
	}
	var out []annotationIssue
	for _, name := range []string{"auth-signin", "auth-response-headers", "auth-method"} {
		if _, set := ann[keyOf(ann, name)]; set {
			out = append(out, annotationIssue{key: keyOf(ann, name), message: name + " without auth-url does nothing"})
		}
	}
	return out
}

// resolveExtAuth makes the pool of auth-url's Service, which must be of
// the Ingress's namespace. A missing Service is a warning: the pool is
// empty, and every request of the Ingress gets 500 (the auth request
// fails), as ingress-nginx does.
func (p *parsedIngress) resolveExtAuth(x *index, opts Options, problems *[]model.Problem) error {
	a := p.settings.extAuth.url
	if a == nil {
		return nil
	}
	if a.namespace != p.ing.Namespace {
		return fmt.Errorf("auth-url names a Service of namespace %s: only the Ingress's own namespace (%s) is allowed",
			quoteForMessage(a.namespace), p.ing.Namespace)
	}
	b := &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: a.service,
		Port: networkingv1.ServiceBackendPort{Number: a.port}}}
	pool, err := p.backendPool(b, fieldForAnnotation(keyOf(p.ing.Annotations, "auth-url")), x, opts, problems)
	if err != nil {
		return err
	}
	p.extAuthPool = pool
	return nil
}

// model is the policy's ExternalAuth, nil without auth-url.
func (p *parsedIngress) extAuthModel() *model.ExternalAuth {
	e := p.settings.extAuth
	if e.url == nil || p.extAuthPool == nil {
		return nil
	}
	return &model.ExternalAuth{PoolID: p.extAuthPool.ID, Host: e.url.host, Path: e.url.path, Method: e.method,
		SigninURL: e.signin, ResponseHeaders: e.headers}
}

// extAuthDifference is how auth-url differs from ingress-nginx.
const extAuthDifference = "http:// to a Service of the Ingress's namespace only (<service>.<namespace>.svc[.cluster.local][:port]/path, " +
	"no https, query or nginx variables); the auth request carries the client's headers, X-Original-URI, X-Original-Method " +
	"and X-Original-URL, no body; answers are not cached"
