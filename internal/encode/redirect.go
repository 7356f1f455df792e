package encode

import "strings"

// PrefixReplace makes the regular expression and replacement of
// replace-path for a Gateway API ReplacePrefixMatch: prefix (the matched
// PathPrefix) and replacement are plain paths without a trailing "/", or
// "" for "/". /prefix/rest becomes replacement + "/rest"; /prefix
// becomes replacement, or "/" when replacement is "". Only "." of a
// plain path is a regex metacharacter, and it is escaped. Both words are
// single-quoted; the replacement holds no "%", so no sample expression.
func PrefixReplace(prefix, replacement string) (regex, repl Word, err error) {
	for _, p := range []struct{ kind, s string }{{"rewritten prefix", prefix}, {"prefix replacement", replacement}} {
		if p.s == "" {
			continue
		}
		if err := plainPath(p.kind, p.s); err != nil {
			return Word{}, Word{}, err
		}
		if strings.HasSuffix(p.s, "/") {
			return Word{}, Word{}, refuse(p.kind, "syntax", p.s, `must not end with "/"`)
		}
	}
	quoted := "^" + strings.ReplaceAll(prefix, ".", `\.`)
	if replacement == "" {
		// "/prefix", "/prefix/" and "/prefix/rest" give "/", "/", "/rest".
		return Word{s: quoted + "/?(.*)$", kind: kindUser, quote: true}, Word{s: `/\1`, kind: kindUser, quote: true}, nil
	}
	return Word{s: quoted + "(/.*)?$", kind: kindUser, quote: true}, Word{s: replacement + `\1`, kind: kindUser, quote: true}, nil
}

// RedirectHostVar is the variable render fills with the request's Host
// header without its port, which RedirectLocation reads when the
// redirect keeps the request's host.
const RedirectHostVar = "txn.pier_rhost"

// RedirectLocation makes the log-format Location of a Gateway API
// redirect: scheme "http" or "https", "://", host (a Host; "" for the
// request's, from RedirectHostVar), ":" port unless port is 0, then the
// request's path and query string as HAProxy holds them (pathq, read
// after any path rewrite of the same request). Nothing of the request
// reaches the configuration file; host is validated and '%'-free.
func RedirectLocation(scheme, host string, port int) (Word, error) {
	if scheme != "http" && scheme != "https" {
		return Word{}, refuse("redirect scheme", "enum", scheme, "must be http or https")
	}
	hostPart := "%[var(" + RedirectHostVar + ")]"
	if host != "" {
		v, err := Host(host)
		if err != nil {
			return Word{}, err
		}
		hostPart = v.s
	}
	s := scheme + "://" + hostPart
	if port != 0 {
		if _, err := Port(port); err != nil {
			return Word{}, err
		}
		s += ":" + itoa(port)
	}
	return Word{s: s + "%[pathq]", kind: kindUser, quote: true}, nil
}

// frameHeaders are the headers a header modifier may not touch: they
// frame the message or the connection (a changed Content-Length or
// Transfer-Encoding is request smuggling), or route it (Host: a
// URLRewrite hostname changes it instead).
var frameHeaders = []string{"content-length", "transfer-encoding", "connection", "keep-alive",
	"proxy-connection", "upgrade", "te", "trailer", "host"}

// ModifiableHeader validates the name of a header that a Gateway API
// header modifier (or a custom-headers annotation, or auth-response-headers
// copying it from the auth answer) sets, adds or removes: a HeaderName
// that is not one of the framing headers.
func ModifiableHeader(name string) (Value, error) {
	v, err := HeaderName(name)
	if err != nil {
		return Value{}, err
	}
	for _, h := range frameHeaders {
		if strings.EqualFold(h, name) {
			return Value{}, refuse("header name", "reserved", name, "frames the message or the connection (or routes it); it cannot be changed")
		}
	}
	return v, nil
}
