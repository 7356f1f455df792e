package annotation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// ingress-nginx's enable-cors defaults.
var (
	defaultCORSMethods = []string{"GET", "PUT", "POST", "DELETE", "PATCH", "OPTIONS"}
	defaultCORSHeaders = []string{"DNT", "Keep-Alive", "User-Agent", "X-Requested-With", "If-Modified-Since",
		"Cache-Control", "Content-Type", "Range", "Authorization"}
)

const (
	defaultCORSMaxAge = 1728000
	maxCORSMaxAge     = 365 * 24 * 3600
	maxCORSOrigins    = 32
	maxCORSList       = 64
)

// CORS are enable-cors and its companions.
type CORS struct {
	Enabled     bool
	Origins     []string
	Methods     []string
	Headers     []string
	Credentials bool
	MaxAge      int
}

func defaultCORS() CORS {
	return CORS{Origins: []string{"*"}, Methods: defaultCORSMethods, Headers: defaultCORSHeaders,
		Credentials: true, MaxAge: defaultCORSMaxAge}
}

// model is the policy's CORS, nil unless enable-cors is true.
func (c CORS) Model() *model.CORS {
	if !c.Enabled {
		return nil
	}
	return &model.CORS{AllowOrigins: slices.Clone(c.Origins), AllowMethods: slices.Clone(c.Methods),
		AllowHeaders: slices.Clone(c.Headers), AllowCredentials: c.Credentials, MaxAgeSeconds: c.MaxAge}
}

// splitList splits a comma-separated list, spaces around items allowed,
// refusing control characters, empty items and more than max items.
func splitList(what, v string, max int) ([]string, error) {
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("%s %s: control character", what, QuoteForMessage(v))
	}
	parts := strings.Split(v, ",")
	if len(parts) > max {
		return nil, fmt.Errorf("%s: %d entries, the limit is %d", what, len(parts), max)
	}
	for i := range parts {
		parts[i] = strings.Trim(parts[i], " ")
	}
	return parts, nil
}

// parseCORSOrigins reads cors-allow-origin: "*" alone, or a list of exact
// origins "scheme://host[:port]" (lowercase). Sorted and deduplicated.
// ingress-nginx's wildcard subdomains (https://*.example.com) are refused.
func parseCORSOrigins(v string) ([]string, error) {
	if v == "*" {
		return []string{"*"}, nil
	}
	parts, err := splitList("cors-allow-origin", v, maxCORSOrigins)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, p := range parts {
		o, err := encode.Origin(p)
		if err != nil {
			return nil, fmt.Errorf("cors-allow-origin (* or exact origins): %w", err)
		}
		seen[o.String()] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// parseCORSMethods reads cors-allow-methods: method tokens, uppercase
// (methods are case-sensitive).
func parseCORSMethods(v string) ([]string, error) {
	parts, err := splitList("cors-allow-methods", v, maxCORSList)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range parts {
		m, err := encode.Method(p)
		if err != nil {
			return nil, fmt.Errorf("cors-allow-methods: %w", err)
		}
		if !slices.Contains(out, m.String()) {
			out = append(out, m.String())
		}
	}
	return out, nil
}

// parseCORSHeaders reads cors-allow-headers: header names.
func parseCORSHeaders(v string) ([]string, error) {
	parts, err := splitList("cors-allow-headers", v, maxCORSList)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range parts {
		h, err := encode.HeaderName(p)
		if err != nil {
			return nil, fmt.Errorf("cors-allow-headers: %w", err)
		}
		if !slices.Contains(out, h.String()) {
			out = append(out, h.String())
		}
	}
	return out, nil
}

// parseCORSMaxAge reads cors-max-age: whole seconds, 0 to a year.
func parseCORSMaxAge(v string) (int, error) {
	n, err := encode.Int(v, 0, maxCORSMaxAge)
	if err != nil {
		return 0, fmt.Errorf("cors-max-age in seconds: %w", err)
	}
	return n, nil
}
