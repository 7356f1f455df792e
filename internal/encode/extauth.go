package encode

import (
	"net/url"
	"strings"
)

// rdExpression is ingress-nginx's rd= value: the request's URL
// (scheme://host + URI), percent-encoded, as a log-format expression.
const rdExpression = "rd=%[ssl_fc,iif(https,http)]%%3A%%2F%%2F%[req.hdr(host),url_enc]%[capture.req.uri,url_enc]"

// signinVariable is an nginx variable auth-signin may hold: the HAProxy
// sample expression it becomes, and a stand-in for validating the URL
// around it (a value of the part of a URL it may take).
type signinVariable struct{ expr, standIn string }

// signinVariables are the nginx variables of auth-signin that pier
// knows, the ones ingress-nginx's and oauth2-proxy's guides write. Each
// becomes a sample fetch of the request, never text from the annotation:
// $host is the Host header without its port, lowercase, and $scheme
// http or https, both percent-encoded by url_enc (a Host of "a?b" cannot
// add a query); $escaped_request_uri is the URI percent-encoded, as
// ingress-nginx's set_escape_uri does; $request_uri is the URI as the
// client sent it (HTTP allows no space, CR or LF in it).
var signinVariables = map[string]signinVariable{
	"scheme":              {"%[ssl_fc,iif(https,http)]", "https"},
	"pass_access_scheme":  {"%[ssl_fc,iif(https,http)]", "https"},
	"host":                {"%[req.hdr(host),field(1,:),lower,url_enc]", "host.invalid"},
	"http_host":           {"%[req.hdr(host),lower,url_enc]", "host.invalid"},
	"best_http_host":      {"%[req.hdr(host),lower,url_enc]", "host.invalid"},
	"request_uri":         {"%[capture.req.uri]", "/uri"},
	"escaped_request_uri": {"%[capture.req.uri,url_enc]", "uri"},
}

// SigninVariableNames lists signinVariables, for messages.
const SigninVariableNames = "$scheme, $pass_access_scheme, $host, $http_host, $best_http_host, $request_uri, $escaped_request_uri"

// SigninLocation makes the redirect location of auth-signin: the URL
// (validated as LogFormatURL, so '%' is literal), its nginx variables
// ($name or ${name}, of signinVariables only) as sample expressions, and,
// unless its query already has rd=, "?rd=" (or "&rd=" when it has a
// query) and the request's URL, percent-encoded, as ingress-nginx does.
// The URL is validated with each variable replaced by a stand-in, so the
// variables take only the places their values may: "$host/x" alone, with
// no scheme, is refused as any URL without one is.
func SigninLocation(s string) (Word, error) {
	type part struct {
		text string
		v    *signinVariable
	}
	var parts []part
	standIn := ""
	for rest := s; rest != ""; {
		i := strings.IndexByte(rest, '$')
		if i < 0 {
			parts, standIn = append(parts, part{text: rest}), standIn+rest
			break
		}
		if i > 0 {
			parts, standIn = append(parts, part{text: rest[:i]}), standIn+rest[:i]
		}
		name, after, ok := variableName(rest[i+1:])
		if !ok {
			return Word{}, refuse("auth-signin", "variable", s, "a '$' that starts no variable name")
		}
		v, known := signinVariables[name]
		if !known {
			return Word{}, refuse("auth-signin", "variable", s, "unknown variable $"+name+"; pier knows "+SigninVariableNames)
		}
		parts, standIn, rest = append(parts, part{v: &v}), standIn+v.standIn, after
	}
	if _, err := LogFormatURL(standIn); err != nil {
		return Word{}, err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.v != nil {
			b.WriteString(p.v.expr)
		} else {
			b.WriteString(strings.ReplaceAll(p.text, "%", "%%"))
		}
	}
	u, err := url.Parse(standIn)
	if err != nil {
		return Word{}, refuse("auth-signin", "syntax", s, "does not parse as a URL")
	}
	if !u.Query().Has("rd") {
		sep := "?"
		if strings.Contains(standIn, "?") {
			sep = "&"
		}
		b.WriteString(sep + rdExpression)
	}
	return Word{s: b.String(), kind: kindUser, quote: true}, nil
}

// variableName reads an nginx variable name at the start of s, "name" or
// "{name}" of lowercase letters and '_', and returns it and what follows.
func variableName(s string) (name, rest string, ok bool) {
	braced := strings.HasPrefix(s, "{")
	if braced {
		s = s[1:]
	}
	n := 0
	for n < len(s) && (s[n] >= 'a' && s[n] <= 'z' || s[n] == '_') {
		n++
	}
	name, rest = s[:n], s[n:]
	if braced {
		if !strings.HasPrefix(rest, "}") {
			return "", "", false
		}
		rest = rest[1:]
	}
	return name, rest, n > 0
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
