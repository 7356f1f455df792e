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
