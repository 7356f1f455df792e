package gatewayapi

import (
	"fmt"
	"slices"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Bounds of render's CORS (render/cors.go).
const (
	maxGatewayCORSOrigins = 32
	maxGatewayCORSMaxAge  = 365 * 24 * 3600
	defaultGatewayMaxAge  = 5 // the CRD's default
)

// allMethods is what allowMethods "*" lists: every method the CRD
// names. Render answers a preflight with the method it asks for
// (model.CORS.EchoRequestMethod); the list is what an agent that does
// not know that field answers.
var allMethods = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

// safelistedMethods are what a CORS filter without allowMethods allows
// (the spec: they are always allowed).
var safelistedMethods = []string{"GET", "HEAD", "POST"}

// parseCORS maps the CORS filter onto render's CORS (model.CORS): "*" or
// exact origins, methods, headers, expose headers, credentials, max age.
// Wildcard origins ("https://*.example.com") match by regex; "*" with
// credentials becomes "http://*" and "https://*", so the request's
// origin is echoed as the spec wants. "*" in allowMethods or
// allowHeaders answers a preflight with the method and headers it asks
// for (valid with credentials too, where the spec wants them echoed).
// Refused: "*" in exposeHeaders (render lists names).
func parseCORS(f *gwv1.HTTPCORSFilter) (*model.CORS, error) {
	credentials := f.AllowCredentials != nil && *f.AllowCredentials
	// A preflight from an origin not allowed is answered 403 by HAProxy
	// (the spec: 204 or 403, without CORS headers), not by the backend.
	c := &model.CORS{AllowCredentials: credentials, MaxAgeSeconds: int(f.MaxAge), RefuseOtherPreflights: true}
	if len(f.AllowOrigins) == 0 {
		return nil, fmt.Errorf("allowOrigins: no origin allowed")
	}
	if len(f.AllowOrigins) > maxGatewayCORSOrigins {
		return nil, fmt.Errorf("allowOrigins: %d origins, pier serves at most %d", len(f.AllowOrigins), maxGatewayCORSOrigins)
	}
	for i, o := range f.AllowOrigins {
		s := string(o)
		if s == "*" {
			if len(f.AllowOrigins) > 1 {
				return nil, fmt.Errorf("allowOrigins[%d]: \"*\" alongside other origins", i)
			}
			c.AllowOrigins = []string{"*"}
			if credentials { // the spec: the request's origin, not "*"
				c.AllowOrigins = []string{"http://*", "https://*"}
			}
			continue
		}
		canonical, err := canonicalOrigin(s)
		if err != nil {
			return nil, fmt.Errorf("allowOrigins[%d]: %w", i, err)
		}
		c.AllowOrigins = append(c.AllowOrigins, canonical)
	}
	var err error
	if c.AllowMethods, err = corsMethods(f.AllowMethods); err != nil {
		return nil, err
	}
	c.EchoRequestMethod = slices.Contains(f.AllowMethods, "*")
	if c.EchoRequestHeaders = slices.Contains(f.AllowHeaders, "*"); c.EchoRequestHeaders {
		if len(f.AllowHeaders) > 1 {
			return nil, fmt.Errorf("allowHeaders: \"*\" alongside other headers")
		}
	} else if c.AllowHeaders, err = corsHeaders("allowHeaders", f.AllowHeaders); err != nil {
		return nil, err
	}
	if c.ExposeHeaders, err = corsHeaders("exposeHeaders", f.ExposeHeaders); err != nil {
		return nil, err
	}
	switch {
	case c.MaxAgeSeconds == 0:
		c.MaxAgeSeconds = defaultGatewayMaxAge
	case c.MaxAgeSeconds < 0 || c.MaxAgeSeconds > maxGatewayCORSMaxAge:
		return nil, fmt.Errorf("maxAge: %d is outside 1-%d", f.MaxAge, maxGatewayCORSMaxAge)
	}
	return c, nil
}

// canonicalOrigin lowercases an origin and drops its scheme's default
// port, as browsers send it: "HTTPS://A.example:443" is
// "https://a.example".
func canonicalOrigin(s string) (string, error) {
	l := strings.ToLower(s)
	if strings.HasPrefix(l, "http://") {
		l = strings.TrimSuffix(l, ":80")
	} else if strings.HasPrefix(l, "https://") {
		l = strings.TrimSuffix(l, ":443")
	}
	check := encode.Origin
	if strings.Contains(l, "*") {
		check = func(s string) (encode.Value, error) { _, err := encode.OriginPattern(s); return encode.Value{}, err }
	}
	if _, err := check(l); err != nil {
		return "", err
	}
	return l, nil
}

func corsMethods(ms []gwv1.HTTPMethodWithWildcard) ([]string, error) {
	if len(ms) == 0 {
		return slices.Clone(safelistedMethods), nil
	}
	var out []string
	for i, m := range ms {
		if m == "*" {
			if len(ms) > 1 {
				return nil, fmt.Errorf("allowMethods[%d]: \"*\" alongside other methods", i)
			}
			return slices.Clone(allMethods), nil
		}
		if _, err := encode.Method(string(m)); err != nil {
			return nil, fmt.Errorf("allowMethods[%d]: %w", i, err)
		}
		out = append(out, string(m))
	}
	return out, nil
}

func corsHeaders(field string, hs []gwv1.HTTPHeaderName) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for i, h := range hs {
		if h == "*" {
			return nil, fmt.Errorf("%s[%d]: \"*\" is not supported (list the header names)", field, i)
		}
		if _, err := encode.HeaderName(string(h)); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", field, i, err)
		}
		if key := strings.ToLower(string(h)); !seen[key] {
			seen[key] = true
			out = append(out, string(h))
		}
	}
	return out, nil
}
