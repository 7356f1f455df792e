package annotation

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"pier.dev/pier/internal/encode"
)

// The value syntaxes of the ingress-nginx annotations: nginx's sizes and
// times, Go's booleans, source ranges, redirect targets and plain paths.

// maxSize bounds proxy-body-size: 1 TiB is far above any upload a proxy
// should buffer, and keeps every value an int64 HAProxy compares exactly.
const maxSize = 1 << 40

// parseSize reads an nginx size: digits, then nothing (bytes), k/K, m/M
// or g/G. "0" means no limit.
func parseSize(v string) (int64, error) {
	if v == "" || len(v) > 16 {
		return 0, fmt.Errorf("size %s: must be digits with an optional unit k, m or g (e.g. 8m)", QuoteForMessage(v))
	}
	digits, scale := v, int64(1)
	switch v[len(v)-1] {
	case 'k', 'K':
		digits, scale = v[:len(v)-1], 1<<10
	case 'm', 'M':
		digits, scale = v[:len(v)-1], 1<<20
	case 'g', 'G':
		digits, scale = v[:len(v)-1], 1<<30
	}
	if digits == "" || len(digits) > 13 || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("size %s: must be digits with an optional unit k, m or g (e.g. 8m)", QuoteForMessage(v))
	}
	var n int64
	for _, c := range digits {
		n = n*10 + int64(c-'0')
	}
	if n > maxSize/scale {
		return 0, fmt.Errorf("size %s: over the limit of 1024g", QuoteForMessage(v))
	}
	return n * scale, nil
}

// parseSeconds reads ingress-nginx's timeouts: whole seconds, 1 to
// 3600, as ingress-nginx documents them; a duration with a unit ("60s",
// "500ms", "2m") is accepted too, as nginx's own time syntax is what
// people write, within 1ms to 1h.
func parseSeconds(v string) (time.Duration, error) {
	if strings.Trim(v, "0123456789") == "" {
		n, err := encode.Int(v, 1, 3600)
		if err != nil {
			return 0, fmt.Errorf("timeout in seconds: %w", err)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := encode.Duration(v, time.Millisecond, time.Hour)
	if err != nil {
		return 0, fmt.Errorf("timeout: %w", err)
	}
	return d, nil
}

// nginxBools are the spellings ingress-nginx accepts for a boolean
// (Go's strconv.ParseBool): an exact list, so still anchored.
var nginxBools = map[string]bool{"true": true, "True": true, "TRUE": true, "t": true, "T": true, "1": true,
	"false": false, "False": false, "FALSE": false, "f": false, "F": false, "0": false}

func parseNginxBool(v string) (bool, error) {
	val, err := encode.Enum(v, slices.Sorted(maps.Keys(nginxBools))...)
	if err != nil {
		return false, err
	}
	return nginxBools[val.String()], nil
}

// maxCIDRs bounds a source range list: each prefix is one ACL value.
const maxCIDRs = 256

// parseCIDRList reads a comma-separated list of prefixes or addresses
// (an address is its own /32 or /128, as ingress-nginx accepts), with
// optional spaces after commas. The result is canonical, sorted and
// deduplicated, so equal lists render equally.
func parseCIDRList(v string) ([]string, error) {
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return nil, fmt.Errorf("source range %s: control character", QuoteForMessage(v))
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxCIDRs {
		return nil, fmt.Errorf("source range: %d entries, the limit is %d", len(parts), maxCIDRs)
	}
	seen := map[string]bool{}
	for _, part := range parts {
		part = strings.Trim(part, " ")
		if !strings.Contains(part, "/") {
			if a, err := netip.ParseAddr(part); err == nil && a.Zone() == "" {
				part = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()).String()
			}
		}
		p, err := encode.CIDR(part)
		if err != nil {
			return nil, fmt.Errorf("source range: %w", err)
		}
		seen[p.String()] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

// parseRedirectURL accepts an absolute http(s) URL (encode.URL), and only
// in the form net/url writes it back: what is rendered is what was given.
func parseRedirectURL(v string) (string, error) {
	u, err := encode.URL(v)
	if err != nil {
		return "", err
	}
	if u.String() != v {
		return "", fmt.Errorf("URL %s is not in canonical form (%s)", QuoteForMessage(v), QuoteForMessage(u.String()))
	}
	return v, nil
}

// parseAppRoot accepts a path (the Exact path rules) other than "/",
// which would redirect to itself, made of letters, digits and ._~/- only:
// an application root needs no query, parameters or escapes.
func parseAppRoot(v string) (string, error) {
	p, err := encode.Path(v, encode.PathExact)
	if err != nil {
		return "", err
	}
	if strings.Trim(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~/-") != "" {
		return "", fmt.Errorf("app-root %s: only letters, digits and ._~/- are accepted", QuoteForMessage(v))
	}
	if v == "/" {
		return "", fmt.Errorf("app-root %s would redirect / to itself", QuoteForMessage(v))
	}
	return p.String(), nil
}

// parseRedirectCode accepts the redirect codes HAProxy can answer.
func parseRedirectCode(v string) (int, error) {
	val, err := encode.Enum(v, "301", "302", "303", "307", "308")
	if err != nil {
		return 0, err
	}
	return map[string]int{"301": 301, "302": 302, "303": 303, "307": 307, "308": 308}[val.String()], nil
}

// rewriteChars are the bytes a plain rewrite-target may hold. No "$"
// (capture groups are read by parseRewriteTarget), no
// "?" (the query string is kept as it came), no "%" (a log-format
// directive in set-path), no escapes.
const rewriteChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~/-"

// PlainPath accepts an absolute path (the Exact path rules) of letters,
// digits and ._~/- only: safe as a log-format argument (no "%"), with no
// query, escapes or capture groups.
func PlainPath(what, v string) (string, error) {
	p, err := encode.Path(v, encode.PathExact)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if strings.Trim(v, rewriteChars) != "" {
		return "", fmt.Errorf("%s %s: only letters, digits and ._~/- are accepted", what, QuoteForMessage(v))
	}
	return p.String(), nil
}

// RegexPathChars are the bytes that make a path a regular expression to
// ingress-nginx once rewrite-target is set (the location becomes
// "~* ^<path>"). "." is left out: as a regular expression it also
// matches itself, so pier's literal match is a subset, not another set.
const RegexPathChars = "*+?()[]{}|^$\\"
