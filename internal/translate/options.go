package translate

import (
	"slices"

	"pier.dev/pier/internal/model"
)

// policyOptions are the ingress-nginx behaviours of p for one of its
// routes, or nil when there are none (the policy then renders exactly as
// without annotations). http says the policy is for the HTTP listener,
// tls that the load balancer has an HTTPS listener.
//
// ssl-redirect is on by default, as in ingress-nginx, but only for the
// hosts this Ingress's own spec.tls lists with a usable Secret, and only
// when an HTTPS listener exists to redirect to; force-ssl-redirect
// redirects every route of the Ingress (TLS may end in front of pier).
func (p *parsedIngress) policyOptions(r route, http, tls bool) *model.PolicyOptions {
	s := &p.settings
	o := model.PolicyOptions{
		AllowSources: s.allowSources,
		DenySources:  s.denySources,
		MaxBodyBytes: s.maxBody,
	}
	if http {
		o.HTTPSRedirect = s.forceSSLRedirect || (s.sslRedirect && tls && p.hasTLSHost(r.host))
	}
	switch {
	case s.temporalRedirect != "":
		o.RedirectURL, o.RedirectCode = s.temporalRedirect, s.temporalCode
	case s.permanentRedirect != "":
		o.RedirectURL, o.RedirectCode = s.permanentRedirect, s.permanentCode
	}
	if !o.HTTPSRedirect && o.RedirectURL == "" && len(o.AllowSources) == 0 &&
		len(o.DenySources) == 0 && o.MaxBodyBytes == 0 {
		return nil
	}
	o.AllowSources = slices.Clone(o.AllowSources)
	o.DenySources = slices.Clone(o.DenySources)
	return &o
}

// hasTLSHost: a certificate of this Ingress was accepted for host (the
// same string, so a wildcard rule needs a wildcard TLS host).
func (p *parsedIngress) hasTLSHost(host string) bool {
	if host == "" {
		return false
	}
	for _, c := range p.certs {
		if slices.Contains(c.Hosts, host) {
			return true
		}
	}
	return false
}

// applyTimeouts sets the pool's timeouts from the Ingress that creates
// it. HAProxy has one server-side inactivity timeout where nginx has a
// read and a send timeout: the larger of the two is used, so neither
// cuts a request earlier than ingress-nginx would.
func (s *ingressSettings) applyTimeouts(pool *model.Pool) {
	pool.ConnectTimeout = s.connectTimeout
	pool.ServerTimeout = max(s.readTimeout, s.sendTimeout)
}
