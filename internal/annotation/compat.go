package annotation

import (
	"maps"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// compatAnnotation is one ingress-nginx annotation pier implements.
type compatAnnotation struct {
	parse func(s *Settings, v string) error
	// difference, when set, says how pier differs from ingress-nginx.
	difference string
}

// compatAnnotations are the ingress-nginx annotations pier implements,
// by name without prefix. Each parser is typed and anchored, so a valid
// value with ";evil" appended fails.
var compatAnnotations = map[string]compatAnnotation{
	"enable-access-log": {parse: func(s *Settings, v string) error {
		on, err := parseNginxBool(v)
		if err != nil {
			return err
		}
		a := model.AccessLog{}
		if on {
			a = model.AccessLogOn
		}
		s.AccessLog = &a
		return nil
	}, difference: "the load balancer's whole access log, as pier.dev/access-log on or off (in a group the most verbose member decides); ingress-nginx's is per location"},
	"ssl-redirect": {parse: func(s *Settings, v string) (err error) {
		s.SSLRedirect, err = parseNginxBool(v)
		return err
	}, difference: "on by default only for the hosts this Ingress's own spec.tls lists (ingress-nginx: any TLS Ingress of the host)"},
	"force-ssl-redirect": {parse: func(s *Settings, v string) (err error) {
		s.ForceSSLRedirect, err = parseNginxBool(v)
		return err
	}},
	"proxy-body-size": {parse: func(s *Settings, v string) (err error) {
		s.MaxBody, err = parseSize(v)
		return err
	}, difference: "no default limit (ingress-nginx: 1m); a chunked body is measured only as far as HAProxy buffers it (about 64 KiB)"},
	"proxy-connect-timeout": {parse: func(s *Settings, v string) (err error) {
		s.ConnectTimeout, err = parseSeconds(v)
		return err
	}, difference: "per Service port: Ingresses of one namespace sharing a backend share the oldest one's value"},
	"proxy-read-timeout": {parse: func(s *Settings, v string) (err error) {
		s.ReadTimeout, err = parseSeconds(v)
		return err
	}, difference: "HAProxy's timeout server (inactivity in both directions), per Service port"},
	"proxy-send-timeout": {parse: func(s *Settings, v string) (err error) {
		s.SendTimeout, err = parseSeconds(v)
		return err
	}, difference: "also HAProxy's timeout server: the larger of read and send is used"},
	"whitelist-source-range": {parse: func(s *Settings, v string) (err error) {
		s.AllowSources, err = parseCIDRList(v)
		return err
	}},
	"allowlist-source-range": {parse: func(s *Settings, v string) (err error) {
		s.AllowSources, err = parseCIDRList(v)
		return err
	}},
	"denylist-source-range": {parse: func(s *Settings, v string) (err error) {
		s.DenySources, err = parseCIDRList(v)
		return err
	}},
	"permanent-redirect": {parse: func(s *Settings, v string) (err error) {
		s.PermanentRedirect, err = parseRedirectURL(v)
		return err
	}},
	"permanent-redirect-code": {parse: func(s *Settings, v string) (err error) {
		s.PermanentCode, err = parseRedirectCode(v)
		return err
	}},
	"temporal-redirect": {parse: func(s *Settings, v string) (err error) {
		s.TemporalRedirect, err = parseRedirectURL(v)
		return err
	}},
	"from-to-www-redirect": {parse: func(s *Settings, v string) (err error) {
		s.FromToWWW, err = parseNginxBool(v)
		return err
	}, difference: "only when no Ingress of the load balancer serves or holds a certificate for the other name"},
	"app-root": {parse: func(s *Settings, v string) (err error) {
		s.AppRoot, err = parseAppRoot(v)
		return err
	}, difference: "the Location is the path alone (relative), not scheme://host + path"},
	"upstream-vhost": {parse: func(s *Settings, v string) error {
		h, err := encode.Host(v)
		s.UpstreamVhost = h.String()
		return err
	}, difference: "a host name only: no nginx variables ($host), no port"},
	"enable-cors": {parse: func(s *Settings, v string) (err error) {
		s.CORS.Enabled, err = parseNginxBool(v)
		return err
	}},
	"cors-allow-origin": {parse: func(s *Settings, v string) (err error) {
		s.CORS.Origins, err = parseCORSOrigins(v)
		return err
	}, difference: "* or exact origins only (no https://*.example.com); matched case-sensitively, lowercase"},
	"cors-allow-methods": {parse: func(s *Settings, v string) (err error) {
		s.CORS.Methods, err = parseCORSMethods(v)
		return err
	}},
	"cors-allow-headers": {parse: func(s *Settings, v string) (err error) {
		s.CORS.Headers, err = parseCORSHeaders(v)
		return err
	}},
	"cors-allow-credentials": {parse: func(s *Settings, v string) (err error) {
		s.CORS.Credentials, err = parseNginxBool(v)
		return err
	}},
	"cors-max-age": {parse: func(s *Settings, v string) (err error) {
		s.CORS.MaxAge, err = parseCORSMaxAge(v)
		return err
	}},
	"affinity": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.Cookie, err = parseAffinity(v)
		return err
	}, difference: "per Service port: Ingresses sharing a backend use the oldest one's cookie"},
	"affinity-mode": {parse: func(_ *Settings, v string) error {
		return parseAffinityMode(v)
	}, difference: "balanced and persistent both behave as persistent: a member joining takes no session; a leaving member's sessions are balanced again"},
	"session-cookie-name": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.Name, err = parseCookieName(v)
		return err
	}},
	"session-cookie-path": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.Path, err = parseCookiePath(v)
		return err
	}, difference: "default / (ingress-nginx: the Ingress path); written after HAProxy's path=/, and browsers take the last Path"},
	"session-cookie-max-age": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.MaxAge, err = parseCookieAge(v)
		return err
	}},
	"session-cookie-expires": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.Expires, err = parseCookieAge(v)
		return err
	}, difference: "sent as Max-Age (no Expires date); session-cookie-max-age wins when both are set"},
	"session-cookie-secure": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.Secure, err = parseCookieSecure(v)
		return err
	}, difference: "false does not remove Secure with session-cookie-samesite None (browsers drop such a cookie without it)"},
	"session-cookie-samesite": {parse: func(s *Settings, v string) (err error) {
		s.Affinity.SameSite, err = parseSameSite(v)
		return err
	}, difference: "None also sets Secure (browsers drop a SameSite=None cookie without it)"},
	"backend-protocol": {parse: func(s *Settings, v string) (err error) {
		s.BackendProtocol, err = parseBackendProtocol(v)
		return err
	}, difference: "per Service port: Ingresses sharing a backend use the oldest one's; HTTPS and GRPCS are not verified and send no SNI unless proxy-ssl-* say so; AJP, FCGI and AUTO_HTTP refuse the Ingress"},
	"ssl-passthrough": {parse: func(s *Settings, v string) (err error) {
		s.SSLPassthrough, err = parseNginxBool(v)
		return err
	}, difference: passthroughDifference},
	"proxy-ssl-verify": {parse: func(s *Settings, v string) (err error) {
		s.ProxySSL.Set = true
		s.ProxySSL.Verify, err = parseOnOff("proxy-ssl-verify", v)
		return err
	}, difference: proxySSLDifference},
	"proxy-ssl-secret": {parse: func(s *Settings, v string) (err error) {
		s.ProxySSL.Set = true
		s.ProxySSL.Secret, err = parseProxySSLSecret(v)
		return err
	}, difference: "a Secret of the Ingress's namespace only (ingress-nginx allows others); ca.crt is required with proxy-ssl-verify on, tls.crt and tls.key (optional) are the client certificate; both are validated and re-encoded, and an invalid one refuses the Ingress"},
	"proxy-ssl-name": {parse: func(s *Settings, v string) (err error) {
		s.ProxySSL.Set = true
		s.ProxySSL.Name, err = parseProxySSLName(v)
		return err
	}, difference: "a host name (lowercase, no wildcard, no nginx variables); default <service>.<namespace>.svc (ingress-nginx: its internal upstream name)"},
	"proxy-ssl-server-name": {parse: func(s *Settings, v string) (err error) {
		s.ProxySSL.Set = true
		s.ProxySSL.ServerName, err = parseOnOff("proxy-ssl-server-name", v)
		return err
	}, difference: "on sends proxy-ssl-name (default <service>.<namespace>.svc) as SNI, health checks included"},
	"rewrite-target": {parse: func(s *Settings, v string) (err error) {
		s.RewriteTarget, s.RewriteTail, s.RewriteGroups, err = parseRewriteTarget(v)
		return err
	}, difference: rewriteDifference},
	"use-regex": {parse: func(s *Settings, v string) (err error) {
		s.UseRegex, err = parseNginxBool(v)
		return err
	}, difference: "true makes this Ingress's paths regular expressions anchored at the start, whatever their pathType: case-sensitive (ingress-nginx: case-insensitive), " +
		"of a subset read alike by RE2 and PCRE2 (docs/migration.md; another expression refuses the Ingress), tried after Exact and before Prefix paths, longest first; " +
		"other Ingresses of the host keep their pathType (ingress-nginx makes every path of the host a regular expression)"},
	"default-backend": {parse: func(s *Settings, v string) (err error) {
		s.DefaultBackend, err = parseDefaultBackendName(v)
		return err
	}, difference: defaultBackendDifference},
	"custom-http-errors": {parse: func(s *Settings, v string) (err error) {
		s.CustomErrors, err = parseCustomHTTPErrors(v)
		return err
	}, difference: customErrorsDifference},
	"auth-url": {parse: func(s *Settings, v string) (err error) {
		s.ExtAuth.URL, err = parseAuthURL(v)
		return err
	}, difference: extAuthDifference},
	"auth-signin": {parse: func(s *Settings, v string) (err error) {
		s.ExtAuth.Signin, err = parseSigninURL(v)
		return err
	}, difference: "an absolute http(s) URL whose nginx variables are " + encode.SigninVariableNames + " (others refuse the Ingress); rd= the request's URL is appended unless the query has rd="},
	"auth-response-headers": {parse: func(s *Settings, v string) (err error) {
		s.ExtAuth.Headers, err = parseAuthResponseHeaders(v)
		return err
	}},
	"auth-method": {parse: func(s *Settings, v string) (err error) {
		s.ExtAuth.Method, err = parseAuthMethod(v)
		return err
	}, difference: "GET (default), HEAD or POST; the auth request never has a body"},
	"auth-type": {parse: func(s *Settings, v string) (err error) {
		s.Auth.Basic, err = parseAuthType(v)
		return err
	}},
	"auth-secret": {parse: func(s *Settings, v string) (err error) {
		s.Auth.Secret, err = parseAuthSecret(v)
		return err
	}, difference: "a Secret of the Ingress's namespace only; its hashes must be htpasswd's $apr1$ (checked in Lua), bcrypt (htpasswd -B) or SHA-512, SHA-256 or MD5 crypt: {SHA} (htpasswd -s) refuses the Ingress"},
	"auth-secret-type": {parse: func(s *Settings, v string) (err error) {
		s.Auth.SecretType, err = parseAuthSecretType(v)
		return err
	}},
	"auth-realm": {parse: func(s *Settings, v string) (err error) {
		s.Auth.Realm, err = parseAuthRealm(v)
		return err
	}, difference: "letters, digits, spaces and ._,:()/@!?- only, at most 128 bytes; default \"Authentication Required\""},
	"limit-rps": {parse: func(s *Settings, v string) (err error) {
		s.RateLimit.RPS, err = parseRateLimit("limit-rps", v)
		return err
	}, difference: rateLimitDifference},
	"limit-rpm": {parse: func(s *Settings, v string) (err error) {
		s.RateLimit.RPM, err = parseRateLimit("limit-rpm", v)
		return err
	}, difference: rateLimitDifference},
	"limit-connections": {parse: func(s *Settings, v string) (err error) {
		s.RateLimit.Connections, err = parseRateLimit("limit-connections", v)
		return err
	}, difference: "counts the requests of a client address in progress at once (what nginx's limit_conn counts), on this Ingress's routes; the excess gets 503"},
	"service-upstream": {parse: func(s *Settings, v string) (err error) {
		s.ServiceUpstream, err = parseNginxBool(v)
		return err
	}, difference: "per Service port: Ingresses sharing a backend use the oldest one's choice"},
	"proxy-next-upstream-tries": {parse: func(s *Settings, v string) (err error) {
		s.Tries, err = parseTries(v)
		return err
	}, difference: "HAProxy's retries (tries - 1) on connection failures and empty responses, per Service port; 1-11, 0 (no limit in nginx) is 11; without it HAProxy's retries 3 (4 tries; ingress-nginx: 3)"},
	"x-forwarded-prefix": {parse: func(s *Settings, v string) (err error) {
		s.ForwardedPrefix, err = PlainPath("x-forwarded-prefix", v)
		return err
	}, difference: "a path of letters, digits and ._~/- only (no nginx variables such as $1)"},
	"canary": {parse: func(s *Settings, v string) (err error) {
		s.Canary.Enabled, err = parseNginxBool(v)
		return err
	}, difference: "the canary Ingress joins the load balancer of the main Ingress of the same namespace with the same host, path and pathType; its own other annotations are not applied to the canary's requests"},
	"canary-weight": {parse: func(s *Settings, v string) (err error) {
		s.Canary.Weight, err = parseCanaryWeight("canary-weight", v, 0)
		return err
	}},
	"canary-weight-total": {parse: func(s *Settings, v string) (err error) {
		s.Canary.Total, err = parseCanaryWeight("canary-weight-total", v, 1)
		return err
	}},
	"canary-by-header": {parse: func(s *Settings, v string) (err error) {
		s.Canary.Header, err = parseCanaryHeader(v)
		return err
	}},
	"canary-by-header-value": {parse: func(s *Settings, v string) (err error) {
		s.Canary.HeaderValue, err = parseCanaryHeaderValue(v)
		return err
	}, difference: "letters, digits, spaces and ._~:/+=@- only, compared exactly (ingress-nginx accepts more)"},
	"canary-by-header-pattern": {parse: func(s *Settings, v string) (err error) {
		s.Canary.HeaderPattern, err = parseCanaryHeaderPattern(v)
		return err
	}, difference: "a regular expression of the subset use-regex accepts (no spaces, flags, \\b or \\s; docs/migration.md), searched in each comma-separated value of the header, case-sensitive as in ingress-nginx; another expression refuses the Ingress"},
	"canary-by-cookie": {parse: func(s *Settings, v string) (err error) {
		s.Canary.Cookie, err = parseCanaryCookie(v)
		return err
	}},
	"custom-headers": {parse: func(s *Settings, v string) (err error) {
		s.CustomHeaders, err = parseCustomHeaders(v)
		return err
	}, difference: customHeadersDifference},
	"temporal-redirect-code": {parse: func(s *Settings, v string) (err error) {
		s.TemporalCode, err = parseRedirectCode(v)
		return err
	}},
}

// Difference says how pier's reading of key, an ingress-nginx annotation
// it implements (under either prefix), differs from ingress-nginx's:
// "" when it does not, or when pier does not implement key.
func Difference(key string) string {
	name, ok := compatName(key)
	if !ok {
		return ""
	}
	return compatAnnotations[name].difference
}

// customHeadersDifference is how custom-headers differs from ingress-nginx.
const customHeadersDifference = "a ConfigMap of the Ingress's namespace; any header but those that frame the message " +
	"(no global-allowed-response-headers list needed); names of letters, digits and - (no _), values without \\ or $ and not with both kinds of quote; " +
	"set on the backend's responses, not on answers pier makes itself (redirects, 403, 503); a change applies at once"

// nginxAlternatives names, for ingress-nginx annotations pier does not
// implement, what pier does instead (snippets: snippets.go).
var nginxAlternatives = map[string]string{
	"server-alias":           "one more host in spec.rules",
	"proxy-set-headers":      "pier.dev/request-headers (typed \"Name: value\" lines on the Ingress itself)",
	"proxy-next-upstream":    "proxy-next-upstream-tries; pier retries on connection failures and empty responses only (HAProxy's retry-on), not on timeouts or 5xx",
	"limit-burst-multiplier": "a higher limit-rps or limit-rpm (pier counts accepted requests over a sliding second or minute, with no burst on top)",
	"proxy-ssl-verify-depth": "a ca.crt holding only the CAs to trust: HAProxy 2.6 has no verify depth for servers, so proxy-ssl-verify on accepts any chain length to ca.crt",
}

// plannedNginx are ingress-nginx annotations pier plans to support but
// does not implement yet, so reported as such rather than as unknown. None
// is left; the list stays for the next family that is started.
var plannedNginx = setOf()

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// unsupportedNginx is the warning for an ingress-nginx annotation pier
// does not implement and that is not a snippet.
func unsupportedNginx(key string) string {
	name := strings.TrimPrefix(key, NginxPrefix)
	if alt, ok := nginxAlternatives[name]; ok {
		return "unsupported ingress-nginx annotation, ignored: use " + alt
	}
	if plannedNginx[name] {
		return "not yet supported by pier (planned), ignored"
	}
	return "unsupported ingress-nginx annotation, ignored (see docs/migration.md)"
}

// NginxAnnotations are the names (without prefix) of the ingress-nginx
// annotations pier implements, sorted.
func NginxAnnotations() []string { return slices.Sorted(maps.Keys(compatAnnotations)) }

// passthroughDifference is how ssl-passthrough differs from ingress-nginx.
const passthroughDifference = "the whole host is passed through on the HTTPS port to the backend of its path / (other paths serve plain HTTP only, " +
	"as in ingress-nginx); needs a rule host (no wildcard); no --enable-ssl-passthrough flag is needed; on port 80 the Ingress is served as usual"
