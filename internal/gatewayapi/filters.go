package gatewayapi

import (
	"fmt"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// gwFilters are a rule's validated filters. What depends on the match
// (a prefix to replace) or the listener (the redirect's scheme and
// port) is resolved per policy by options.
type gwFilters struct {
	reqHeaders, resHeaders []model.HeaderOp
	redirect               *gwRedirect
	rewriteHost            string
	rewritePath            *gwPath
	cors                   *model.CORS
}

// gwRedirect is a validated RequestRedirect: "" scheme and 0 port take
// the listener's, as the spec says.
type gwRedirect struct {
	scheme, host string
	port         int
	path         *gwPath
	code         int
}

// gwPath is a validated HTTPPathModifier: a full path, or a prefix
// replacement without trailing "/" ("" for "/").
type gwPath struct {
	full   string
	prefix *string
}

// parseFilters validates a rule's filters. Each of the five supported
// types may appear once (the CRD's rules, checked again: a store is
// editable); a redirect and a rewrite exclude each other. Any other
// type, RequestMirror, ExternalAuth and ExtensionRef included,
// refuses the route: ignoring a filter would serve it other than
// written.
func parseFilters(field string, fs []gwv1.HTTPRouteFilter) (gwFilters, *routeRefusal) {
	var out gwFilters
	seen := map[gwv1.HTTPRouteFilterType]bool{}
	for i, f := range fs {
		at := fmt.Sprintf("%s[%d]", field, i)
		if seen[f.Type] {
			return out, &routeRefusal{at, fmt.Sprintf("a second %s filter", translate.Quote(string(f.Type)))}
		}
		seen[f.Type] = true
		var err error
		switch {
		case f.Type == gwv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier != nil:
			out.reqHeaders, err = headerOps(f.RequestHeaderModifier)
			at += ".requestHeaderModifier"
		case f.Type == gwv1.HTTPRouteFilterResponseHeaderModifier && f.ResponseHeaderModifier != nil:
			out.resHeaders, err = headerOps(f.ResponseHeaderModifier)
			at += ".responseHeaderModifier"
		case f.Type == gwv1.HTTPRouteFilterRequestRedirect && f.RequestRedirect != nil:
			out.redirect, err = parseRedirect(f.RequestRedirect)
			at += ".requestRedirect"
		case f.Type == gwv1.HTTPRouteFilterURLRewrite && f.URLRewrite != nil:
			err = out.parseRewrite(f.URLRewrite)
			at += ".urlRewrite"
		case f.Type == gwv1.HTTPRouteFilterCORS && f.CORS != nil:
			out.cors, err = parseCORS(f.CORS)
			at += ".cors"
		case f.Type == gwv1.HTTPRouteFilterRequestHeaderModifier, f.Type == gwv1.HTTPRouteFilterResponseHeaderModifier,
			f.Type == gwv1.HTTPRouteFilterRequestRedirect, f.Type == gwv1.HTTPRouteFilterURLRewrite, f.Type == gwv1.HTTPRouteFilterCORS:
			err = fmt.Errorf("type %s without its settings", translate.Quote(string(f.Type)))
		default:
			err = fmt.Errorf("filter type %s is not supported (RequestHeaderModifier, ResponseHeaderModifier, RequestRedirect, URLRewrite, CORS)",
				translate.Quote(string(f.Type)))
		}
		if err != nil {
			return out, &routeRefusal{at, err.Error()}
		}
	}
	if out.redirect != nil && (out.rewriteHost != "" || out.rewritePath != nil) {
		return out, &routeRefusal{field, "RequestRedirect and URLRewrite exclude each other"}
	}
	return out, nil
}

// headerOps turns a header filter into ordered operations: remove, then
// set, then add, so "remove X, set X" leaves the value set and "set X,
// add X" both values. Names are case-insensitive: one name twice in a
// list is refused, as the CRD does.
func headerOps(f *gwv1.HTTPHeaderFilter) ([]model.HeaderOp, error) {
	var out []model.HeaderOp
	lists := []struct {
		what    string
		op      model.HeaderOpKind
		headers []gwv1.HTTPHeader
	}{{"set", model.HeaderSet, f.Set}, {"add", model.HeaderAdd, f.Add}}
	seen := map[string]bool{}
	for i, name := range f.Remove {
		if err := checkHeaderName(seen, "remove", i, name); err != nil {
			return nil, err
		}
		out = append(out, model.HeaderOp{Op: model.HeaderRemove, Name: name})
	}
	for _, l := range lists {
		seen = map[string]bool{}
		for i, h := range l.headers {
			if err := checkHeaderName(seen, l.what, i, string(h.Name)); err != nil {
				return nil, err
			}
			if _, err := encode.HeaderSetValue(h.Value); err != nil {
				return nil, fmt.Errorf("%s[%d].value: %w", l.what, i, err)
			}
			out = append(out, model.HeaderOp{Op: l.op, Name: string(h.Name), Value: h.Value})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no header to set, add or remove")
	}
	return out, nil
}

// maxFilterHeaders is the CRD's bound on each list.
const maxFilterHeaders = 16

func checkHeaderName(seen map[string]bool, what string, i int, name string) error {
	if i >= maxFilterHeaders {
		return fmt.Errorf("%s: more than %d headers", what, maxFilterHeaders)
	}
	if _, err := encode.ModifiableHeader(name); err != nil {
		return fmt.Errorf("%s[%d].name: %w", what, i, err)
	}
	key := strings.ToLower(name)
	if seen[key] {
		return fmt.Errorf("%s[%d].name: header %s is listed twice", what, i, translate.Quote(name))
	}
	seen[key] = true
	return nil
}

// redirectCodes are the spec's (301, 302) and the extended ones.
var gatewayRedirectCodes = map[int]bool{301: true, 302: true, 303: true, 307: true, 308: true}

func parseRedirect(f *gwv1.HTTPRequestRedirectFilter) (*gwRedirect, error) {
	r := &gwRedirect{code: 302}
	if f.Scheme != nil {
		if *f.Scheme != "http" && *f.Scheme != "https" {
			return nil, fmt.Errorf("scheme %s is not http or https", translate.Quote(*f.Scheme))
		}
		r.scheme = *f.Scheme
	}
	if f.Hostname != nil {
		if _, err := encode.Host(string(*f.Hostname)); err != nil {
			return nil, fmt.Errorf("hostname: %w", err)
		}
		r.host = string(*f.Hostname)
	}
	if f.Port != nil {
		if *f.Port < 1 || *f.Port > 65535 {
			return nil, fmt.Errorf("port %d is outside 1-65535", *f.Port)
		}
		r.port = int(*f.Port)
	}
	if f.StatusCode != nil {
		if !gatewayRedirectCodes[*f.StatusCode] {
			return nil, fmt.Errorf("statusCode %d is not one of 301, 302, 303, 307, 308", *f.StatusCode)
		}
		r.code = *f.StatusCode
	}
	var err error
	if f.Path != nil {
		if r.path, err = parsePathModifier(f.Path); err != nil {
			return nil, fmt.Errorf("path: %w", err)
		}
	}
	return r, nil
}

func (out *gwFilters) parseRewrite(f *gwv1.HTTPURLRewriteFilter) error {
	if f.Hostname != nil {
		if _, err := encode.Host(string(*f.Hostname)); err != nil {
			return fmt.Errorf("hostname: %w", err)
		}
		out.rewriteHost = string(*f.Hostname)
	}
	if f.Path != nil {
		p, err := parsePathModifier(f.Path)
		if err != nil {
			return fmt.Errorf("path: %w", err)
		}
		out.rewritePath = p
	}
	if out.rewriteHost == "" && out.rewritePath == nil {
		return fmt.Errorf("neither hostname nor path")
	}
	return nil
}

// parsePathModifier accepts plain paths (letters, digits and ._~/-):
// they reach a set-path or a regex replacement, where anything more
// would need escaping pier does not do.
func parsePathModifier(m *gwv1.HTTPPathModifier) (*gwPath, error) {
	switch {
	case m.Type == gwv1.FullPathHTTPPathModifier && m.ReplaceFullPath != nil && m.ReplacePrefixMatch == nil:
		full, err := translate.PlainPath("replaceFullPath", *m.ReplaceFullPath)
		if err != nil {
			return nil, err
		}
		return &gwPath{full: full}, nil
	case m.Type == gwv1.PrefixMatchHTTPPathModifier && m.ReplacePrefixMatch != nil && m.ReplaceFullPath == nil:
		v := strings.TrimRight(*m.ReplacePrefixMatch, "/")
		if v != "" {
			if _, err := translate.PlainPath("replacePrefixMatch", v); err != nil {
				return nil, err
			}
		}
		return &gwPath{prefix: &v}, nil
	}
	return nil, fmt.Errorf("type %s with replaceFullPath or replacePrefixMatch as it requires (ReplaceFullPath, ReplacePrefixMatch)",
		translate.Quote(string(m.Type)))
}

// checkPrefixMatches refuses ReplacePrefixMatch on a rule with a match
// other than PathPrefix (the spec's rule), or whose prefix is more than
// a plain path (the regex would need escaping).
func (f gwFilters) checkPrefixMatches(matches []gwMatch) error {
	var p *gwPath
	switch {
	case f.rewritePath != nil && f.rewritePath.prefix != nil:
		p = f.rewritePath
	case f.redirect != nil && f.redirect.path != nil && f.redirect.path.prefix != nil:
		p = f.redirect.path
	}
	if p == nil {
		return nil
	}
	for j, m := range matches {
		if m.pathMatch != model.CompareStartsWith {
			return fmt.Errorf("matches[%d]: ReplacePrefixMatch needs a PathPrefix match", j)
		}
		if _, err := translate.PlainPath("path prefix", m.path); err != nil {
			return fmt.Errorf("matches[%d]: ReplacePrefixMatch: %w", j, err)
		}
	}
	return nil
}

// options are the policy options of one match of the rule on a listener
// (protocol, port); nil without filters.
func (f gwFilters) options(m gwMatch, proto model.Protocol, port int) *model.PolicyOptions {
	o := &model.PolicyOptions{RequestHeaders: f.reqHeaders, ResponseHeaders: f.resHeaders, UpstreamHost: f.rewriteHost, CORS: f.cors}
	prefix := strings.TrimSuffix(m.path, "/") // "/" is ""
	if p := f.rewritePath; p != nil {
		if p.prefix != nil {
			o.PrefixRewrite = &model.PrefixRewrite{Prefix: prefix, Replacement: *p.prefix}
		} else {
			o.RewritePath = p.full
		}
	}
	if r := f.redirect; r != nil {
		o.Redirect = r.model(prefix, proto, port)
	}
	if o.Redirect == nil && o.PrefixRewrite == nil && o.RewritePath == "" && o.UpstreamHost == "" &&
		len(o.RequestHeaders) == 0 && len(o.ResponseHeaders) == 0 && o.CORS == nil {
		return nil
	}
	return o
}

// model applies the spec's port rules: an explicit port; else the
// scheme's well-known port when the filter names a scheme; else the
// listener's. The port is left out of Location when it is the scheme's
// default (80 for http, 443 for https).
func (r *gwRedirect) model(prefix string, proto model.Protocol, listenerPort int) *model.Redirect {
	scheme := "http"
	if proto == model.ProtocolTerminatedHTTPS {
		scheme = "https"
	}
	port := listenerPort
	if r.scheme != "" {
		scheme = r.scheme
		port = map[string]int{"http": 80, "https": 443}[scheme]
	}
	if r.port != 0 {
		port = r.port
	}
	if (scheme == "http" && port == 80) || (scheme == "https" && port == 443) {
		port = 0
	}
	out := &model.Redirect{Scheme: scheme, Host: r.host, Port: port, Code: r.code}
	if r.path != nil {
		if r.path.prefix != nil {
			out.PrefixRewrite = &model.PrefixRewrite{Prefix: prefix, Replacement: *r.path.prefix}
		} else {
			out.FullPath = r.path.full
		}
	}
	return out
}
