package render

import (
	"errors"
	"fmt"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// corsProfile is a policy's model.CORS, validated again.
type corsProfile struct {
	any         bool          // AllowOrigins is ["*"]
	origins     []encode.Word // exact origins, when not any
	patterns    []encode.Word // regexes of wildcard origins (encode.OriginPattern)
	methods     encode.Word   // "GET, POST", for a log-format argument
	headers     encode.Word   // "Content-Type, Authorization"; valid when hasHeaders
	hasHeaders  bool
	expose      encode.Word // Access-Control-Expose-Headers; valid when hasExpose
	hasExpose   bool
	credentials bool
	maxAge      int
	echoMethod  bool // answer a preflight with the method it asks for
	echoHeaders bool // and with the headers it asks for
	refuseOther bool // 403 to a preflight from an origin not allowed
}

// Bounds as translation's.
const (
	maxCORSOrigins = 32
	maxCORSList    = 64
	maxCORSMaxAge  = 365 * 24 * 3600
)

func corsOf(c *model.CORS) (*corsProfile, error) {
	if c == nil {
		return nil, nil
	}
	p := &corsProfile{credentials: c.AllowCredentials, maxAge: c.MaxAgeSeconds,
		echoMethod: c.EchoRequestMethod, echoHeaders: c.EchoRequestHeaders, refuseOther: c.RefuseOtherPreflights}
	if c.MaxAgeSeconds < 0 || c.MaxAgeSeconds > maxCORSMaxAge {
		return nil, fmt.Errorf("cors max age %d is outside 0-%d", c.MaxAgeSeconds, maxCORSMaxAge)
	}
	switch {
	case len(c.AllowOrigins) == 0:
		return nil, errors.New("cors without allowed origins")
	case len(c.AllowOrigins) > maxCORSOrigins:
		return nil, fmt.Errorf("cors: %d origins, the limit is %d", len(c.AllowOrigins), maxCORSOrigins)
	case len(c.AllowOrigins) == 1 && c.AllowOrigins[0] == "*":
		p.any = true
	default:
		for _, o := range c.AllowOrigins {
			if strings.Contains(o, "*") {
				w, err := encode.OriginPattern(o)
				if err != nil {
					return nil, fmt.Errorf("cors: %w", err)
				}
				p.patterns = append(p.patterns, w)
				continue
			}
			v, err := encode.Origin(o)
			if err != nil {
				return nil, fmt.Errorf("cors: %w", err)
			}
			p.origins = append(p.origins, v.Word())
		}
	}
	var err error
	if p.methods, err = corsList(c.AllowMethods, encode.Method); err != nil {
		return nil, fmt.Errorf("cors methods: %w", err)
	}
	// No allowed header (a Gateway API CORS filter without
	// allowHeaders) leaves Access-Control-Allow-Headers out.
	if p.hasHeaders = len(c.AllowHeaders) > 0; p.hasHeaders {
		if p.headers, err = corsList(c.AllowHeaders, encode.HeaderName); err != nil {
			return nil, fmt.Errorf("cors headers: %w", err)
		}
	}
	if p.hasExpose = len(c.ExposeHeaders) > 0; p.hasExpose {
		if p.expose, err = corsList(c.ExposeHeaders, encode.HeaderName); err != nil {
			return nil, fmt.Errorf("cors expose headers: %w", err)
		}
	}
	return p, nil
}

// corsList validates each item and joins them for a header value.
func corsList(items []string, check func(string) (encode.Value, error)) (encode.Word, error) {
	if len(items) == 0 || len(items) > maxCORSList {
		return encode.Word{}, fmt.Errorf("%d items, 1-%d are accepted", len(items), maxCORSList)
	}
	vs := make([]encode.Value, len(items))
	for i, s := range items {
		v, err := check(s)
		if err != nil {
			return encode.Word{}, err
		}
		vs[i] = v
	}
	joined, err := encode.JoinList(vs)
	if err != nil {
		return encode.Word{}, err
	}
	w := joined.LogFormatWord()
	return w, w.Err()
}

// Preflight request headers echoed (Gateway API CORS "*"), only when
// well-formed: a method token, and a list of header names.
var (
	requestMethodSample  = encode.Lit("req.fhdr(access-control-request-method)")
	requestHeadersSample = encode.Lit("req.fhdr(access-control-request-headers)")
	requestMethodRegex   = encode.Lit(`^[A-Z]{1,32}$`)
	requestHeadersRegex  = encode.Lit(`^[A-Za-z0-9_-]{1,64}( *, *[A-Za-z0-9_-]{1,64}){0,63}$`)
)

// writeCORS renders a profile's CORS. With exact origins, the request
// must carry exactly one Origin header line, equal to one of them; it is
// kept in txn.pier_cors for the response. A preflight (OPTIONS) from an
// allowed origin is answered 204 by HAProxy; other requests go on, and
// their responses get Access-Control-Allow-Origin (and -Credentials).
// A request from another origin is served without any CORS header, as
// ingress-nginx does. The preflight's answer carries the exposed headers
// too (the Gateway API suite asks for them there).
func writeCORS(c *encode.Config, name encode.Word, id string, p *corsProfile) {
	origin := encode.Lit("*")
	cond := []encode.Word{ifWord, name}
	respCond := []encode.Word{ifWord, name}
	if !p.any {
		acl := encode.ID("pier_cors_", id)
		// Lines of one ACL name are ORed: exact origins, then patterns.
		if len(p.origins) > 0 {
			words := []encode.Word{encode.Lit("acl"), acl, encode.Lit("req.fhdr(origin)"), encode.Lit("-m"), encode.Lit("str")}
			c.Line(append(words, p.origins...)...)
		}
		if len(p.patterns) > 0 {
			words := []encode.Word{encode.Lit("acl"), acl, encode.Lit("req.fhdr(origin)"), encode.Lit("-m"), encode.Lit("reg")}
			c.Line(append(words, p.patterns...)...)
		}
		cond = append(cond, acl, openBrace, encode.Lit("req.fhdr_cnt(origin)"), encode.Lit("eq"), encode.Num(1), closeBrace)
		c.Line(append([]encode.Word{httpRequest, encode.Lit("set-var(txn.pier_cors)"), encode.Lit("req.fhdr(origin)")}, cond...)...)
		origin = encode.Lit("%[var(txn.pier_cors)]")
		respCond = append(respCond, openBrace, encode.Lit("var(txn.pier_cors)"), encode.Lit("-m"), encode.Lit("found"), closeBrace)
	}
	preflight := append(append([]encode.Word{}, cond...), encode.Lit("METH_OPTIONS"))
	methods, headers := p.methods, p.headers
	if p.echoMethod {
		// The list, unless the preflight asks for a well-formed method.
		c.Line(append([]encode.Word{httpRequest, encode.Lit("set-var-fmt(txn.pier_corsm)"), p.methods}, preflight...)...)
		c.Line(append(append([]encode.Word{httpRequest, encode.Lit("set-var(txn.pier_corsm)"), requestMethodSample}, preflight...),
			openBrace, requestMethodSample, encode.Lit("-m"), encode.Lit("reg"), requestMethodRegex, closeBrace)...)
		methods = encode.Lit("%[var(txn.pier_corsm)]")
	}
	if p.echoHeaders {
		// Unset (no header line: HAProxy leaves an empty one out) unless
		// the preflight asks for well-formed header names.
		c.Line(append(append([]encode.Word{httpRequest, encode.Lit("set-var(txn.pier_corsh)"), requestHeadersSample}, preflight...),
			openBrace, requestHeadersSample, encode.Lit("-m"), encode.Lit("reg"), requestHeadersRegex, closeBrace)...)
		headers = encode.Lit("%[var(txn.pier_corsh)]")
	}
	hdr := encode.Lit("hdr")
	ret := []encode.Word{httpRequest, encode.Lit("return"), encode.Lit("status"), encode.Num(204),
		hdr, encode.Lit("Access-Control-Allow-Origin"), origin}
	if p.credentials {
		ret = append(ret, hdr, encode.Lit("Access-Control-Allow-Credentials"), encode.Lit("true"))
	}
	ret = append(ret, hdr, encode.Lit("Access-Control-Allow-Methods"), methods)
	if p.hasHeaders || p.echoHeaders {
		ret = append(ret, hdr, encode.Lit("Access-Control-Allow-Headers"), headers)
	}
	if p.hasExpose {
		ret = append(ret, hdr, encode.Lit("Access-Control-Expose-Headers"), p.expose)
	}
	ret = append(ret, hdr, encode.Lit("Access-Control-Max-Age"), encode.Num(p.maxAge))
	c.Line(append(ret, preflight...)...)
	if p.refuseOther && !p.any {
		// What the line above did not answer: another origin, or more
		// than one Origin line.
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403), ifWord, name, encode.Lit("METH_OPTIONS"),
			openBrace, encode.Lit("req.hdr(origin)"), encode.Lit("-m"), encode.Lit("found"), closeBrace,
			openBrace, requestMethodSample, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	}
	resp := encode.Lit("http-response")
	c.Line(append([]encode.Word{resp, encode.Lit("set-header"), encode.Lit("Access-Control-Allow-Origin"), origin}, respCond...)...)
	if p.credentials {
		c.Line(append([]encode.Word{resp, encode.Lit("set-header"), encode.Lit("Access-Control-Allow-Credentials"),
			encode.Lit("true")}, respCond...)...)
	}
	if p.hasExpose {
		c.Line(append([]encode.Word{resp, encode.Lit("set-header"), encode.Lit("Access-Control-Expose-Headers"),
			p.expose}, respCond...)...)
	}
}
