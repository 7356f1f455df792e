package encode

import "strings"

// rdExpression is ingress-nginx's rd= value: the request's URL
// (scheme://host + URI), percent-encoded, as a log-format expression.
const rdExpression = "rd=%[ssl_fc,iif(https,http)]%%3A%%2F%%2F%[req.hdr(host),url_enc]%[capture.req.uri,url_enc]"

// SigninLocation makes the redirect location of auth-signin: the URL
// (validated as LogFormatURL, so '%' is literal) followed by "?rd=" (or
// "&rd=" when it has a query) and the request's URL, percent-encoded.
func SigninLocation(s string) (Word, error) {
	w, err := LogFormatURL(s)
	if err != nil {
		return Word{}, err
	}
	sep := "?"
	if strings.Contains(s, "?") {
		sep = "&"
	}
	return Word{s: w.s + sep + rdExpression, kind: kindUser, quote: true}, nil
}

// HeaderList joins header names (each a HeaderName) with "," for a Lua
// action's argument; "-" when there are none.
func HeaderList(names []Value) (Word, error) {
	if len(names) == 0 {
		return Lit("-"), nil
	}
	parts := make([]string, len(names))
	for i, n := range names {
		if _, err := HeaderName(n.s); err != nil {
			return Word{}, err
		}
		parts[i] = n.s
	}
	return Word{s: strings.Join(parts, ","), kind: kindUser, quote: true}, nil
}

// ObjectName validates a Kubernetes object name or a Service port name
// as a Lua action's argument (custom-http-errors' X-Namespace,
// X-Ingress-Name, X-Service-Name, X-Service-Port): 1-253 lowercase
// letters, digits, '.' and '-', starting and ending with a letter or
// digit.
func ObjectName(s string) (Word, error) {
	const k = "object name"
	if s == "" || len(s) > 253 {
		return Word{}, refuse(k, "length", s, "must be 1-253 characters")
	}
	for i := 0; i < len(s); i++ {
		if !objectNameChars[s[i]] {
			return Word{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are lowercase letters, digits, '.' and '-'")
		}
	}
	if s[0] == '.' || s[0] == '-' || s[len(s)-1] == '.' || s[len(s)-1] == '-' {
		return Word{}, refuse(k, "syntax", s, "must start and end with a letter or digit")
	}
	return Word{s: s, kind: kindUser, quote: true}, nil
}

var objectNameChars = charset("abcdefghijklmnopqrstuvwxyz0123456789.-")
