package translate

import (
	"slices"
	"strings"

	"pier.dev/pier/internal/model"
)

// policyOptions are the ingress-nginx behaviours of p for one of its
// routes, or nil when there are none (the policy then renders exactly as
// without annotations). http says the policy is for the HTTP listener,
// tls that the HTTPS listener serves a certificate for the route's host.
//
// ssl-redirect is on by default, as in ingress-nginx, but only for the
// hosts this Ingress's own spec.tls lists with a usable Secret, and only
// when the HTTPS listener serves that certificate (it may have lost the
// host to an older namespace: TLSHostConflict); force-ssl-redirect
// redirects every route of the Ingress (TLS may end in front of pier).
func (p *parsedIngress) policyOptions(r route, http, tls bool) *model.PolicyOptions {
	s := &p.settings
	if r.wwwTo != "" {
		scheme := "https://"
		if http {
			scheme = "http://"
		}
		return &model.PolicyOptions{RedirectPrefix: scheme + r.wwwTo, RedirectCode: 308}
	}
	o := model.PolicyOptions{
		AllowSources:    s.AllowSources,
		DenySources:     s.DenySources,
		MaxBodyBytes:    s.MaxBody,
		AppRoot:         s.AppRoot,
		UpstreamHost:    s.UpstreamVhost,
		RewritePath:     rewritePathOf(p),
		StripPrefix:     stripPrefixOf(p, r),
		RewriteRegex:    rewriteRegexOf(p, r),
		ForwardedPrefix: s.ForwardedPrefix,
		CORS:            s.CORS.Model(),
		BasicAuth:       s.basicAuthModel(),
		RateLimit:       s.RateLimit.Model(),
		DefaultBackend:  p.fallbackFor(r),
		CustomErrors:    p.customErrorsFor(r),
		ExternalAuth:    p.extAuthModel(),
		RequestHeaders:  slices.Clone(s.RequestHeaders),
		ResponseHeaders: slices.Clone(s.ResponseHeaders),
	}
	if http {
		o.HTTPSRedirect = s.ForceSSLRedirect || (s.SSLRedirect && tls && p.hasTLSHost(r.host))
	}
	switch {
	case s.TemporalRedirect != "":
		o.RedirectURL, o.RedirectCode = s.TemporalRedirect, s.TemporalCode
	case s.PermanentRedirect != "":
		o.RedirectURL, o.RedirectCode = s.PermanentRedirect, s.PermanentCode
	}
	if !o.HTTPSRedirect && o.RedirectURL == "" && len(o.AllowSources) == 0 && len(o.DenySources) == 0 &&
		o.MaxBodyBytes == 0 && o.AppRoot == "" && o.UpstreamHost == "" && o.CORS == nil &&
		o.RewritePath == "" && o.BasicAuth == nil && o.RateLimit == nil && o.ForwardedPrefix == "" &&
		o.DefaultBackend == nil && o.CustomErrors == nil && o.ExternalAuth == nil && len(o.RequestHeaders) == 0 && len(o.ResponseHeaders) == 0 {
		return nil // nothing set: the policy renders as without annotations
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
	pool.ConnectTimeout = s.ConnectTimeout
	pool.ServerTimeout = max(s.ReadTimeout, s.SendTimeout)
}

// wwwRoutes adds, for each Ingress with from-to-www-redirect, a route
// for the other name of each of its hosts ("www.foo.com" for "foo.com"
// and back) that redirects to the host itself, as ingress-nginx does.
// The other name is left alone when any route of the load balancer
// serves it, or a certificate of another namespace holds it: the
// redirect never takes a name from someone else.
func wwwRoutes(members []*parsedIngress, owners map[string]*parsedIngress) []keptRoute {
	served := map[string]bool{}
	for _, p := range members {
		for _, r := range p.routes {
			served[r.host] = true
		}
	}
	var out []keptRoute
	for _, p := range members {
		if !p.settings.FromToWWW {
			continue
		}
		for _, r := range p.routes {
			twin := twinHost(r.host)
			if r.hostMatch != model.CompareEqualTo || twin == "" || served[twin] {
				continue
			}
			if o := owners[string(model.CompareEqualTo)+"\x00"+twin]; o != nil && o.source.Namespace != p.source.Namespace {
				continue
			}
			served[twin] = true
			out = append(out, keptRoute{owner: p, route: route{host: twin, hostMatch: model.CompareEqualTo,
				path: "/", pathMatch: model.CompareStartsWith, poolID: r.poolID, field: r.field, wwwTo: r.host}})
		}
	}
	return out
}

// twinHost is "www." added or removed; "" when the result is not a host
// of at least two labels or too long.
func twinHost(h string) string {
	twin, ok := strings.CutPrefix(h, "www.")
	if !ok {
		twin = "www." + h
	}
	if !strings.Contains(twin, ".") {
		return ""
	}
	if _, err := checkHost(twin); err != nil {
		return ""
	}
	return twin
}
