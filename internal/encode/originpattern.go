package encode

import (
	"net"
	"strings"
)

// OriginPattern makes the regular expression matching the origins of a
// wildcard origin (Gateway API CORS allowOrigins): "scheme://*" is every
// host name of the scheme, with any port; "scheme://*.host[:port]" every
// host name ending with ".host" (one or more labels before it, as the
// spec's greedy "*"), with exactly that port, or none when it has none
// (browsers leave the scheme's default port out). scheme://host[:port]
// after the "*." must be an Origin, so the host holds letters, digits,
// '.' and '-' only; its dots are escaped. Single-quoted: the config
// parser interprets nothing in it.
func OriginPattern(s string) (Word, error) {
	const k = "origin pattern"
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok || (scheme != "http" && scheme != "https") {
		return Word{}, refuse(k, "syntax", s, "must be http://*... or https://*...")
	}
	if rest == "*" {
		return Word{s: "^" + scheme + "://[a-z0-9.-]+(:[0-9]{1,5})?$", kind: kindUser, quote: true}, nil
	}
	suffix, ok := strings.CutPrefix(rest, "*.")
	if !ok {
		return Word{}, refuse(k, "syntax", s, "the host must be * or start with *.")
	}
	if _, err := Origin(scheme + "://" + suffix); err != nil {
		return Word{}, err
	}
	host, port, err := net.SplitHostPort(suffix)
	if err != nil {
		host, port = suffix, ""
	}
	if host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyz0123456789.-") != "" {
		return Word{}, refuse(k, "charset", s, "the host after *. must be a DNS name")
	}
	re := "^" + scheme + `://[a-z0-9.-]+\.` + strings.ReplaceAll(host, ".", `\.`)
	if port != "" {
		re += ":" + port
	}
	return Word{s: re + "$", kind: kindUser, quote: true}, nil
}
