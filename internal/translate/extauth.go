package translate

import (
	"fmt"
	"slices"
	"strconv"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

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
	e := p.settings.ExtAuth
	a := e.URL
	if a == nil {
		return nil
	}
	if a.Namespace != p.ing.Namespace && !slices.Contains(opts.AuthURLNamespaces, a.Namespace) {
		return fmt.Errorf("auth-url names a Service of namespace %s: only the Ingress's own namespace (%s) is allowed, "+
			"or one the operator lists in --auth-url-namespaces", annotation.QuoteForMessage(a.Namespace), p.ing.Namespace)
	}
	field := fieldForAnnotation(annotation.KeyOf(p.ing.Annotations, "auth-url"))
	b := &networkingv1.IngressServiceBackend{Name: a.Service, Port: networkingv1.ServiceBackendPort{Number: a.Port}}
	set := p.settings
	set.BackendProtocol, set.upstreamTLS = "", nil // the pool speaks auth-url's scheme
	pool, warnings, err := x.poolIn(a.Namespace, p.ing, b, field+".service", set, opts)
	if err != nil {
		return err
	}
	if a.TLS {
		upstream, err := p.authUpstream(x, a)
		if err != nil {
			return err
		}
		pool.Protocol, pool.UpstreamTLS = model.BackendHTTPS, upstream
		pool.ID = model.ID("auth-tls", pool.ID, upstream.Namespace, upstream.Secret, upstream.CASHA256, strconv.FormatBool(upstream.Verify))
	} else if p.settings.BackendProtocol != "" {
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
func (p *parsedIngress) authUpstream(x *index, a *annotation.AuthURL) (*model.UpstreamTLS, error) {
	e := p.settings.ExtAuth
	u := &model.UpstreamTLS{Verify: !e.NoVerify, SNI: true, Name: a.Host}
	if e.NoVerify {
		return u, nil
	}
	if e.CASecret == "" {
		return nil, fmt.Errorf("auth-url %s is https: name the Secret of this namespace whose ca.crt signs the auth Service's certificate "+
			"with %s, or do without the check with %s: \"false\" (ingress-nginx does not check it)", a.Host, annotation.AuthURLCASecret, annotation.AuthURLVerify)
	}
	sec := x.snap.Secret(p.ing.Namespace, e.CASecret)
	if sec == nil {
		return nil, fmt.Errorf("%s: secret %s/%s not found", annotation.AuthURLCASecret, p.ing.Namespace, e.CASecret)
	}
	ca, ok := sec.Data["ca.crt"]
	if !ok {
		return nil, fmt.Errorf("%s: secret %s/%s has no ca.crt", annotation.AuthURLCASecret, p.ing.Namespace, e.CASecret)
	}
	b, err := tlscert.ParseCA(ca)
	if err != nil {
		return nil, fmt.Errorf("%s: secret %s/%s: ca.crt: %w", annotation.AuthURLCASecret, p.ing.Namespace, e.CASecret, err)
	}
	u.Namespace, u.Secret, u.CASHA256 = p.ing.Namespace, e.CASecret, b.SHA256
	return u, nil
}

// model is the policy's ExternalAuth, nil without auth-url.
func (p *parsedIngress) extAuthModel() *model.ExternalAuth {
	e := p.settings.ExtAuth
	if e.URL == nil || p.extAuthPool == nil {
		return nil
	}
	return &model.ExternalAuth{PoolID: p.extAuthPool.ID, Host: e.URL.Host, Path: e.URL.Path, Method: e.Method,
		SigninURL: e.Signin, ResponseHeaders: e.Headers}
}
