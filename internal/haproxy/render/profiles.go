package render

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// A profile is a policy's model.PolicyOptions, validated again (the
// store may be edited by anyone with RBAC on it) and named by a hash of
// its content. Routing stays one map lookup: the map value of a policy
// with options is "<backend>@<profile>"; the frontend splits it into
// txn.pier_be and txn.pier_prof, and each profile's rules test
// txn.pier_prof. A policy without options keeps the plain backend value,
// so a load balancer without annotations renders exactly as before.
type profile struct {
	id               string
	httpsRedirect    bool
	redirect         encode.Word // zero when no redirect
	redirectCode     int
	prefix           bool // redirect is a prefix: the request URI is appended
	allow, deny      []netip.Prefix
	maxBody          int64
	appRoot          encode.Word // valid when hasAppRoot
	upstreamHost     encode.Word // valid when hasUpstream
	rewritePath      encode.Word // valid when hasRewrite
	stripRegex       encode.Word // valid when hasStrip: ^P(/|$)(.*), and rewritePath is T\2
	hasStrip         bool        // also for RewriteRegex: stripRegex is the route's expression, rewritePath the target with \1-\9
	forwardedPrefix  encode.Word // valid when hasPrefix
	hasPrefix        bool
	hasAppRoot       bool
	hasUpstream      bool
	hasRewrite       bool
	prefixRegex      encode.Word // valid when hasPrefixRewrite, with prefixRepl
	prefixRepl       encode.Word
	hasPrefixRewrite bool
	gwRedirect       *redirectProfile // nil without a Gateway API redirect
	reqHeaders       []headerOp
	resHeaders       []headerOp
	cors             *corsProfile         // nil without enable-cors
	auth             *authProfile         // nil without basic auth
	extAuth          *extAuthProfile      // nil without auth-url
	limit            *limitProfile        // nil without rate limits
	canary           *canaryProfile       // nil without a canary
	split            *splitProfile        // nil without a split of pools
	fallback         *fallbackProfile     // nil without default-backend
	customErrors     *customErrorsProfile // nil without custom-http-errors
}

// maxProfileBody bounds MaxBodyBytes as translation does (1 TiB).
const maxProfileBody = 1 << 40

// maxSources bounds each source list as translation does.
const maxSources = 256

// maxPoolTimeout bounds a pool's timeouts: translation allows 1 hour.
const maxPoolTimeout = 24 * time.Hour

var redirectCodes = []int{301, 302, 303, 307, 308}

func profileOf(o *model.PolicyOptions, tls bool, lists *sections, pools map[string]bool) (*profile, error) {
	if o == nil {
		return nil, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	p := &profile{id: model.ID("profile", string(b)), httpsRedirect: o.HTTPSRedirect, maxBody: o.MaxBodyBytes}
	if o.HTTPSRedirect && tls {
		return nil, errors.New("https redirect on a TLS listener would loop")
	}
	if o.MaxBodyBytes < 0 || o.MaxBodyBytes > maxProfileBody {
		return nil, fmt.Errorf("max body %d bytes is outside 0-%d", o.MaxBodyBytes, maxProfileBody)
	}
	if err := redirectOf(p, o); err != nil {
		return nil, err
	}
	if err := appRootAndHost(p, o); err != nil {
		return nil, err
	}
	if err := rewriteOf(p, o); err != nil {
		return nil, err
	}
	if err := gatewayFiltersOf(p, o); err != nil {
		return nil, err
	}
	if p.cors, err = corsOf(o.CORS); err != nil {
		return nil, err
	}
	if p.auth, err = lists.authProfile(o.BasicAuth); err != nil {
		return nil, err
	}
	if p.extAuth, err = lists.extAuthProfile(o.ExternalAuth, pools); err != nil {
		return nil, err
	}
	if p.limit, err = lists.rateLimitProfile(o.RateLimit, p.id); err != nil {
		return nil, err
	}
	if p.canary, err = canaryOf(o.Canary, lists.uuid, pools); err != nil {
		return nil, err
	}
	if p.split, err = splitOf(o.Split, lists.uuid, pools); err != nil {
		return nil, err
	}
	if p.split != nil && p.canary != nil {
		return nil, errors.New("a canary and a split of pools exclude each other")
	}
	if p.fallback, err = fallbackOf(o.DefaultBackend, lists.uuid, pools); err != nil {
		return nil, err
	}
	if p.customErrors, err = lists.customErrorsProfile(o.CustomErrors, pools); err != nil {
		return nil, err
	}
	if p.allow, err = prefixes(o.AllowSources); err != nil {
		return nil, fmt.Errorf("allowed sources: %w", err)
	}
	if p.deny, err = prefixes(o.DenySources); err != nil {
		return nil, fmt.Errorf("denied sources: %w", err)
	}
	if !p.httpsRedirect && p.redirectCode == 0 && len(p.allow) == 0 && len(p.deny) == 0 && p.maxBody == 0 &&
		!p.hasAppRoot && !p.hasUpstream && !p.hasRewrite && !p.hasPrefix && p.cors == nil && p.auth == nil && p.limit == nil && p.canary == nil &&
		p.split == nil && p.fallback == nil && p.extAuth == nil && p.customErrors == nil && !p.hasGatewayFilters() {
		return nil, nil // empty options render as none
	}
	return p, nil
}

// redirectOf validates a redirect to a URL or, for from-to-www-redirect,
// to a prefix "scheme://host" (no path: HAProxy appends the request's).
func redirectOf(p *profile, o *model.PolicyOptions) error {
	target := o.RedirectURL
	switch {
	case o.RedirectURL != "" && o.RedirectPrefix != "":
		return errors.New("both a redirect URL and a redirect prefix")
	case o.RedirectPrefix != "":
		if strings.Count(o.RedirectPrefix, "/") != 2 || strings.Contains(o.RedirectPrefix, "?") {
			return fmt.Errorf("redirect prefix %s must be scheme://host", encode.Printable(o.RedirectPrefix))
		}
		target, p.prefix = o.RedirectPrefix, true
	case o.RedirectURL == "" && o.RedirectCode != 0:
		return errors.New("a redirect code without a redirect")
	case o.RedirectURL == "":
		return nil
	}
	var err error
	if p.redirect, err = encode.LogFormatURL(target); err != nil {
		return fmt.Errorf("redirect: %w", err)
	}
	if !slices.Contains(redirectCodes, o.RedirectCode) {
		return fmt.Errorf("redirect code %d is not one of 301, 302, 303, 307, 308", o.RedirectCode)
	}
	p.redirectCode = o.RedirectCode
	return nil
}

// appRootAndHost validates app-root (a path, not "/") and
// upstream-vhost (a host name), both for log-format arguments.
func appRootAndHost(p *profile, o *model.PolicyOptions) error {
	if o.AppRoot != "" {
		v, err := encode.Path(o.AppRoot, encode.PathExact)
		if err != nil {
			return fmt.Errorf("app root: %w", err)
		}
		if o.AppRoot == "/" {
			return errors.New("app root / would redirect to itself")
		}
		if p.appRoot = v.LogFormatWord(); p.appRoot.Err() != nil {
			return p.appRoot.Err()
		}
		p.hasAppRoot = true
	}
	if o.UpstreamHost != "" {
		v, err := encode.Host(o.UpstreamHost)
		if err != nil {
			return fmt.Errorf("upstream host: %w", err)
		}
		if p.upstreamHost = v.LogFormatWord(); p.upstreamHost.Err() != nil {
			return p.upstreamHost.Err()
		}
		p.hasUpstream = true
	}
	return nil
}

// rewriteChars are the bytes a rewritten path may hold, as translation
// allows them: no "%" (a log-format directive), "$", "?" or escapes.
const rewriteChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~/-"

// rewriteOf validates the path of rewrite-target for set-path, and that
// of x-forwarded-prefix for set-header, both log-format arguments.
func rewriteOf(p *profile, o *model.PolicyOptions) error {
	var err error
	switch {
	case o.RewriteRegex != "" && o.StripPrefix != "":
		return errors.New("rewrite regex and strip prefix are exclusive")
	case o.RewriteRegex != "":
		re, err := encode.ParsePathRegex(o.RewriteRegex)
		if err != nil {
			return fmt.Errorf("rewrite regex: %w", err)
		}
		if p.rewritePath, err = encode.RegexTarget(o.RewritePath, re.Groups()); err != nil {
			return fmt.Errorf("rewrite path: %w", err)
		}
		p.stripRegex, p.hasRewrite, p.hasStrip = re.Word(), true, true
	case o.StripPrefix != "":
		if p.stripRegex, err = encode.StripPrefixRegex(o.StripPrefix); err != nil {
			return fmt.Errorf("strip prefix: %w", err)
		}
		if p.rewritePath, err = encode.TailRewrite(o.RewritePath); err != nil {
			return fmt.Errorf("rewrite path: %w", err)
		}
		p.hasRewrite, p.hasStrip = true, true
	case o.RewritePath != "":
		if p.rewritePath, err = plainPathWord("rewrite path", o.RewritePath); err != nil {
			return err
		}
		p.hasRewrite = true
	}
	if o.ForwardedPrefix != "" {
		if p.forwardedPrefix, err = plainPathWord("forwarded prefix", o.ForwardedPrefix); err != nil {
			return err
		}
		p.hasPrefix = true
	}
	return nil
}

// plainPathWord is a path of letters, digits and ._~/- as a log-format
// word (no "%", so no expression).
func plainPathWord(what, path string) (encode.Word, error) {
	v, err := encode.Path(path, encode.PathExact)
	if err != nil {
		return encode.Word{}, fmt.Errorf("%s: %w", encode.Printable(what), err)
	}
	if strings.Trim(path, rewriteChars) != "" {
		return encode.Word{}, fmt.Errorf("%s %s holds more than letters, digits and ._~/-", encode.Printable(what), encode.Printable(path))
	}
	w := v.LogFormatWord()
	return w, w.Err()
}

// prefixes re-validates canonical CIDRs.
func prefixes(list []string) ([]netip.Prefix, error) {
	if len(list) > maxSources {
		return nil, fmt.Errorf("%d prefixes, the limit is %d", len(list), maxSources)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := encode.CIDR(s)
		if err != nil {
			return nil, err
		}
		if p.String() != s {
			return nil, fmt.Errorf("prefix %s is not canonical", encode.Printable(s))
		}
		out = append(out, p)
	}
	return out, nil
}

// checkPoolTimeouts re-validates a pool's timeouts.
func checkPoolTimeouts(p *model.Pool) error {
	for _, d := range []time.Duration{p.ConnectTimeout, p.ServerTimeout, p.Deadline} {
		if d < 0 || d > maxPoolTimeout || d%time.Millisecond != 0 {
			return fmt.Errorf("timeout %d ns is not whole milliseconds within 0-24h", int64(d))
		}
	}
	return nil
}

// listenerProfiles lists the distinct profiles of a listener's policies,
// by id, so their rules render in a stable order.
func listenerProfiles(ps []policyView) []*profile {
	seen := map[string]*profile{}
	for _, p := range ps {
		if p.profile != nil {
			seen[p.profile.id] = p.profile
		}
	}
	out := make([]*profile, 0, len(seen))
	for _, p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *profile) int { return cmp.Compare(a.id, b.id) })
	return out
}

// profileValue is the map value of a policy with a profile.
func profileValue(backend encode.Word, p *profile) encode.Word {
	return encode.Concat(backend, encode.Lit("@"), encode.ID("", p.id))
}

var profVar = encode.Lit("var(txn.pier_prof)")

// writeProfileSplit splits a mapped listener's "<backend>@<profile>".
func writeProfileSplit(c *encode.Config) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_prof)"), encode.Lit("var(txn.pier_be),field(2,@)"), ifWord, routedACL)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_be)"), encode.Lit("var(txn.pier_be),field(1,@)"), ifWord, routedACL)
}

// sourcesPerLine keeps an acl line far below HAProxy's 64 words.
const sourcesPerLine = 32

// writeProfiles renders each profile's rules, in the order
// model.PolicyOptions documents: https redirect, the Gateway API
// redirect, redirect, app root, rate limits (503), sources (403), CORS
// (a 204 preflight), basic auth (401), body size (413), the header
// changes (request, then response), the upstream Host header, then the
// rewritten path. Routing has already used the
// original path: the frontend's lookups (map or ACL) run before these
// rules and use_backend only reads their result. A body without Content-Length (chunked, HTTP/2) is
// buffered first; HAProxy 2.6 buffers about 64 KiB of it (65,524 bytes
// measured with tune.bufsize 16384), so a larger limit is best effort
// for such bodies (docs/migration.md).
func writeProfiles(c *encode.Config, ps []*profile) {
	for _, p := range ps {
		name := encode.ID("pier_prof_", p.id)
		c.Line(encode.Lit("acl"), name, profVar, encode.Lit("-m"), encode.Lit("str"), encode.ID("", p.id))
		if p.customErrors != nil {
			writeCustomErrorsRequest(c, name)
		}
		writeProfileRedirects(c, name, p)
		if p.limit != nil {
			writeRateLimit(c, name, p.limit)
		}
		if len(p.allow) > 0 {
			acl := encode.ID("pier_allow_", p.id)
			sourceACL(c, acl, p.allow)
			c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403), ifWord, name, encode.Concat(encode.Lit("!"), acl))
		}
		if len(p.deny) > 0 {
			acl := encode.ID("pier_deny_", p.id)
			sourceACL(c, acl, p.deny)
			c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403), ifWord, name, acl)
		}
		if p.cors != nil {
			writeCORS(c, name, p.id, p.cors)
		}
		if p.auth != nil {
			writeAuth(c, name, p.auth)
		}
		if p.extAuth != nil {
			writeExtAuth(c, name, p.extAuth)
		}
		if p.maxBody > 0 {
			writeBodyLimit(c, name, p.maxBody)
		}
		writeHeaderOps(c, httpRequest, name, p.reqHeaders)
		if p.customErrors != nil {
			writeCustomErrors(c, name, p.customErrors)
		}
		writeHeaderOps(c, encode.Lit("http-response"), name, p.resHeaders)
		writeProfileRewrites(c, name, p)
		if p.canary != nil {
			writeCanary(c, name, p.canary)
		}
		if p.split != nil {
			writeSplit(c, name, p.split)
		}
		if p.fallback != nil {
			writeFallback(c, name, p.fallback)
		}
	}
}

// writeProfileRedirects are a profile's rules that answer with a
// redirect: https, the Gateway API's redirect, the redirect
// annotations, then the app root.
func writeProfileRedirects(c *encode.Config, name encode.Word, p *profile) {
	if p.httpsRedirect {
		// redirect scheme keeps the Host header whole: "a.com:80"
		// would send the client to https://a.com:80/. Drop the port
		// first (an IPv6 literal ends with "]", so it keeps its
		// colons); the request is answered here, nothing else sees it.
		// A request whose X-Forwarded-Proto says https came over TLS
		// that a proxy in front ended: the forwarding rules before
		// these keep that header only from a --trusted-proxies
		// client (pier sets "http" for any other), and redirecting it
		// would loop.
		notHTTPS := []encode.Word{encode.Lit("!{"), encode.Lit("req.hdr(x-forwarded-proto)"), encode.Lit("-i"),
			encode.Lit("-m"), encode.Lit("str"), encode.Lit("https"), closeBrace}
		c.Line(append([]encode.Word{httpRequest, encode.Lit("replace-header"), encode.Lit("Host"), encode.Lit("^(.*):[0-9]+$"),
			encode.Lit("\\1"), ifWord, name}, notHTTPS...)...)
		c.Line(append([]encode.Word{httpRequest, encode.Lit("redirect"), encode.Lit("scheme"), encode.Lit("https"),
			encode.Lit("code"), encode.Num(308), ifWord, name}, notHTTPS...)...)
	}
	if p.gwRedirect != nil {
		writeRedirect(c, name, p.gwRedirect)
	}
	if p.redirectCode != 0 {
		kind := encode.Lit("location")
		if p.prefix {
			kind = encode.Lit("prefix")
		}
		c.Line(httpRequest, encode.Lit("redirect"), kind, p.redirect,
			encode.Lit("code"), encode.Num(p.redirectCode), ifWord, name)
	}
	if p.hasAppRoot {
		c.Line(httpRequest, encode.Lit("redirect"), encode.Lit("location"), p.appRoot, encode.Lit("code"), encode.Num(302),
			ifWord, name, openBrace, encode.Lit("path"), encode.Lit("/"), closeBrace)
	}
}

// writeProfileRewrites change what the backend is sent: the upstream
// Host header, X-Forwarded-Prefix, then the path.
func writeProfileRewrites(c *encode.Config, name encode.Word, p *profile) {
	if p.hasUpstream {
		c.Line(httpRequest, encode.Lit("set-header"), encode.Lit("Host"), p.upstreamHost, ifWord, name)
	}
	if p.hasPrefix {
		c.Line(httpRequest, encode.Lit("set-header"), encode.Lit("X-Forwarded-Prefix"), p.forwardedPrefix, ifWord, name)
	}
	switch {
	case p.hasStrip:
		// replace-path works on the path only: the query string is
		// kept (HAProxy 2.6 manual).
		c.Line(httpRequest, encode.Lit("replace-path"), p.stripRegex, p.rewritePath, ifWord, name)
	case p.hasRewrite:
		// set-path keeps the query string (HAProxy 2.6 manual).
		c.Line(httpRequest, encode.Lit("set-path"), p.rewritePath, ifWord, name)
	case p.hasPrefixRewrite:
		c.Line(httpRequest, encode.Lit("replace-path"), p.prefixRegex, p.prefixRepl, ifWord, name)
	}
}

func sourceACL(c *encode.Config, acl encode.Word, list []netip.Prefix) {
	for chunk := range slices.Chunk(list, sourcesPerLine) {
		words := []encode.Word{encode.Lit("acl"), acl, encode.Lit("src")}
		for _, p := range chunk {
			words = append(words, encode.Prefix(p))
		}
		c.Line(words...)
	}
}

// maxWaitForBody is the largest "wait-for-body at-least" HAProxy 2.6
// parses: a 32-bit size (haproxy -c refuses 4294967296).
const maxWaitForBody = 1<<32 - 1

// writeBodyLimit answers 413 to a body over limit. Content-Length is
// compared as a string cast to a 64-bit integer: req.hdr_val is 32 bits
// in HAProxy 2.6 and wraps (4294967396 reads as 100), which let a
// declared 4 GiB + 100 bytes through a 1m limit and made a 4G limit
// useless. A chunked body is measured as far as HAProxy buffers it
// (tune.bufsize); a limit past wait-for-body's 32-bit range is past any
// buffer too, so only Content-Length is checked then.
func writeBodyLimit(c *encode.Config, name encode.Word, limit int64) {
	n := encode.Num64(limit)
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(413), ifWord, name,
		openBrace, encode.Lit("req.hdr(content-length)"), encode.Lit("-m"), encode.Lit("int"), encode.Lit("gt"), n, closeBrace)
	if limit+1 > maxWaitForBody {
		return
	}
	c.Line(httpRequest, encode.Lit("wait-for-body"), encode.Lit("time"), encode.Lit("10s"), encode.Lit("at-least"),
		encode.Num64(limit+1), ifWord, name, encode.Lit("!{"), encode.Lit("req.hdr(content-length)"),
		encode.Lit("-m"), encode.Lit("found"), closeBrace)
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(413), ifWord, name,
		openBrace, encode.Lit("req.body_size"), encode.Lit("gt"), n, closeBrace)
}
