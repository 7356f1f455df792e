package translate

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// maxAuthHeaders bounds auth-response-headers (one rule each).
const maxAuthHeaders = 16

// extAuthSettings are auth-url and its companions, and pier's own
// annotations for TLS to the auth Service.
type extAuthSettings struct {
	url     *authURL
	signin  string
	headers []string
	method  string
	// caSecret (pier.dev/auth-url-ca-secret) names the Secret of the
	// Ingress's namespace whose ca.crt signs the auth Service's
	// certificate; noVerify (pier.dev/auth-url-verify: "false") opts out
	// of checking it.
	caSecret string
	noVerify bool
}

// authURL is auth-url read as a Service address:
// http(s)://<service>.<namespace>.svc[.cluster.local][:port]/path.
type authURL struct {
	service, namespace, host, path string
	port                           int32
	tls                            bool // https://
}

// parseAuthURL accepts an http or https URL to a Service by its cluster
// DNS name, with an optional port (80, or 443 for https, by default) and
// a path of letters, digits and ._~/- (default "/"); no user info, query
// or fragment, in the form Go's net/url writes it.
//
// Where the auth request goes is decided here, from the annotation
// alone, never from the request: every request of the Ingress is sent
// there with the client's headers, so a destination a client or a
// tenant could aim elsewhere (another host, an address, a name that
// resolves to the cloud's metadata service) would make pier a proxy into
// the cluster's and the node's network. Hence a Service name, and no
// nginx variables ($host would let the client pick the destination).
func parseAuthURL(v string) (*authURL, error) {
	bad := func(why string) (*authURL, error) {
		return nil, fmt.Errorf("auth-url %s: %s", quoteForMessage(v), why)
	}
	if strings.Contains(v, "$") {
		return bad("nginx variables ($host, ...) cannot say where pier sends the auth request, or a client would choose it: " +
			"name the auth Service, http(s)://<service>.<namespace>.svc.cluster.local[:port]/path (variables are for auth-signin)")
	}
	u, err := url.Parse(v)
	if err != nil || u.String() != v || u.Opaque != "" {
		return bad("not a URL in canonical form")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return bad("only http:// or https:// to a Service is supported")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return bad("no user info, query or fragment")
	}
	host := strings.TrimSuffix(u.Hostname(), ".cluster.local")
	labels := strings.Split(host, ".")
	if len(labels) != 3 || labels[2] != "svc" {
		return bad("the host must be <service>.<namespace>.svc or <service>.<namespace>.svc.cluster.local: " +
			"pier sends auth requests to a Service's endpoints only, never to another host or address")
	}
	if errs := validation.IsDNS1035Label(labels[0]); len(errs) > 0 {
		return bad("service: " + strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Label(labels[1]); len(errs) > 0 {
		return bad("namespace: " + strings.Join(errs, "; "))
	}
	a := &authURL{service: labels[0], namespace: labels[1], host: u.Hostname(), path: u.Path, port: 80, tls: u.Scheme == "https"}
	if a.tls {
		a.port = 443
	}
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

// parseSigninURL checks auth-signin as render will write it
// (encode.SigninLocation: a canonical URL whose variables are of a fixed
// set) and keeps it as written.
func parseSigninURL(v string) (string, error) {
	if _, err := encode.SigninLocation(v); err != nil {
		return "", fmt.Errorf("auth-signin: %w", err)
	}
	return v, nil
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
	if e.url != nil && !e.url.tls {
		for _, k := range []string{AnnotationAuthURLCASecret, AnnotationAuthURLVerify} {
			if _, set := ann[k]; set {
				return []annotationIssue{{key: k, message: "applies to an https:// auth-url only, ignored"}}
			}
		}
	}
	if _, set := ann[annotation.KeyOf(ann, "auth-url")]; e.url != nil || set {
		return nil
	}
	for _, k := range []string{AnnotationAuthURLCASecret, AnnotationAuthURLVerify} {
		if _, set := ann[k]; set {
			return []annotationIssue{{key: k, message: "without auth-url does nothing"}}
		}
	}
	var out []annotationIssue
	for _, name := range []string{"auth-signin", "auth-response-headers", "auth-method"} {
		if _, set := ann[annotation.KeyOf(ann, name)]; set {
			out = append(out, annotationIssue{key: annotation.KeyOf(ann, name), message: name + " without auth-url does nothing"})
		}
	}
	return out
}

// resolveExtAuth makes the pool of auth-url's Service, which must be of
// the Ingress's namespace or of one the operator lists in
// --auth-url-namespaces (an oauth2-proxy of its own namespace that every
// tenant may use); a tenant can never send its users' requests, cookies
// and all, to another tenant's Service. A missing Service is a warning:
// the pool is empty, and every request of the Ingress gets 500 (the auth
// request fails), as ingress-nginx does.
//
// Its protocol is auth-url's scheme, whatever backend-protocol says of
// the Ingress's own routes: over https the pool's servers speak TLS to
// the Service's endpoints, with SNI the URL's host, and check their
// certificate against pier.dev/auth-url-ca-secret's ca.crt and that
// host, unless pier.dev/auth-url-verify is "false" (ingress-nginx does
// not check it: with pier it takes saying so). A pool whose protocol may
// differ from the Ingress's routes' (https, or routes of another
// backend-protocol) has an ID of its own, so that a route to the same
// Service port keeps its protocol.
func (p *parsedIngress) resolveExtAuth(x *index, opts Options, problems *[]model.Problem) error {
	e := p.settings.extAuth
	a := e.url
	if a == nil {
		return nil
	}
	if a.namespace != p.ing.Namespace && !slices.Contains(opts.AuthURLNamespaces, a.namespace) {
		return fmt.Errorf("auth-url names a Service of namespace %s: only the Ingress's own namespace (%s) is allowed, "+
			"or one the operator lists in --auth-url-namespaces", quoteForMessage(a.namespace), p.ing.Namespace)
	}
	field := fieldForAnnotation(annotation.KeyOf(p.ing.Annotations, "auth-url"))
	b := &networkingv1.IngressServiceBackend{Name: a.service, Port: networkingv1.ServiceBackendPort{Number: a.port}}
	set := p.settings
	set.backendProtocol, set.proxySSL.resolved = "", nil // the pool speaks auth-url's scheme
	pool, warnings, err := x.poolIn(a.namespace, p.ing, b, field+".service", set, opts)
	if err != nil {
		return err
	}
	if a.tls {
		upstream, err := p.authUpstream(x, a)
		if err != nil {
			return err
		}
		pool.Protocol, pool.UpstreamTLS = model.BackendHTTPS, upstream
		pool.ID = model.ID("auth-tls", pool.ID, upstream.Namespace, upstream.Secret, upstream.CASHA256, strconv.FormatBool(upstream.Verify))
	} else if p.settings.backendProtocol != "" {
		// The Ingress's routes to this Service port speak another protocol.
		pool.ID = model.ID("auth-http", pool.ID)
	}
	*problems = append(*problems, warnings...)
	if existing, ok := p.pools[pool.ID]; ok {
		pool = existing
	} else {
		p.pools[pool.ID] = pool
	}
	p.extAuthPool = pool
	return nil
}

// authUpstream is the TLS an https auth-url's pool speaks: SNI and the
// name checked are the URL's host; the CA is pier.dev/auth-url-ca-secret's
// ca.crt, unless pier.dev/auth-url-verify says "false".
func (p *parsedIngress) authUpstream(x *index, a *authURL) (*model.UpstreamTLS, error) {
	e := p.settings.extAuth
	u := &model.UpstreamTLS{Verify: !e.noVerify, SNI: true, Name: a.host}
	if e.noVerify {
		return u, nil
	}
	if e.caSecret == "" {
		return nil, fmt.Errorf("auth-url %s is https: name the Secret of this namespace whose ca.crt signs the auth Service's certificate "+
			"with %s, or do without the check with %s: \"false\" (ingress-nginx does not check it)", a.host, AnnotationAuthURLCASecret, AnnotationAuthURLVerify)
	}
	sec := x.snap.Secret(p.ing.Namespace, e.caSecret)
	if sec == nil {
		return nil, fmt.Errorf("%s: secret %s/%s not found", AnnotationAuthURLCASecret, p.ing.Namespace, e.caSecret)
	}
	ca, ok := sec.Data["ca.crt"]
	if !ok {
		return nil, fmt.Errorf("%s: secret %s/%s has no ca.crt", AnnotationAuthURLCASecret, p.ing.Namespace, e.caSecret)
	}
	b, err := tlscert.ParseCA(ca)
	if err != nil {
		return nil, fmt.Errorf("%s: secret %s/%s: ca.crt: %w", AnnotationAuthURLCASecret, p.ing.Namespace, e.caSecret, err)
	}
	u.Namespace, u.Secret, u.CASHA256 = p.ing.Namespace, e.caSecret, b.SHA256
	return u, nil
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
const extAuthDifference = "http(s):// to a Service (<service>.<namespace>.svc[.cluster.local][:port]/path) of the Ingress's namespace, " +
	"or of one listed in --auth-url-namespaces; no query or nginx variables; https checks the Service's certificate against " +
	"pier.dev/auth-url-ca-secret unless pier.dev/auth-url-verify is \"false\"; the auth request carries the client's headers, X-Original-URI, X-Original-Method " +
	"and X-Original-URL, no body; answers are not cached"

// parseSecretName accepts the name of a Secret of the Ingress's own
// namespace.
func parseSecretName(what, v string) (string, error) {
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", fmt.Errorf("%s %s: a Secret name of the Ingress's namespace: %s", what, quoteForMessage(v), strings.Join(errs, "; "))
	}
	return v, nil
}
