package model

// PolicyOptions are what a policy does to a matching request before it
// reaches its pool, in this order: HTTPSRedirect, RedirectURL or
// RedirectPrefix, AppRoot, RateLimit (503), the source checks (403), the
// CORS preflight (204), BasicAuth (401), ExternalAuth, MaxBodyBytes (413),
// RequestHeaders, UpstreamHost, ForwardedPrefix, RewritePath or
// PrefixRewrite, then the Canary's choice of pool, then DefaultBackend;
// CustomErrors, then ResponseHeaders, apply to the pool's answer. Redirect, a Gateway API
// RequestRedirect, comes with the other redirects, first. Translation
// fills them from one Ingress's annotations or one HTTPRoute rule's
// filters, so they never leak to another object's routes on a shared
// load balancer.
type PolicyOptions struct {
	// HTTPSRedirect answers 308 with the same host and URI over https
	// (only set on HTTP listeners).
	HTTPSRedirect bool `json:"httpsRedirect,omitempty"`
	// RedirectURL, when set, answers every request with RedirectCode
	// (301, 302, 303, 307 or 308) and Location RedirectURL, an absolute
	// http(s) URL.
	RedirectURL  string `json:"redirectUrl,omitempty"`
	RedirectCode int    `json:"redirectCode,omitempty"`
	// RedirectPrefix, when set instead of RedirectURL, answers with
	// RedirectCode and Location RedirectPrefix + the request's URI; it is
	// "scheme://host" with no path (from-to-www-redirect).
	RedirectPrefix string `json:"redirectPrefix,omitempty"`
	// AllowSources, when not empty, are the only client prefixes served;
	// DenySources are refused. Both canonical CIDRs; 403 otherwise.
	AllowSources []string `json:"allowSources,omitempty"`
	DenySources  []string `json:"denySources,omitempty"`
	// MaxBodyBytes refuses larger request bodies with 413; 0 is no limit.
	MaxBodyBytes int64 `json:"maxBodyBytes,omitempty"`
	// AppRoot, when set, answers 302 with Location AppRoot (a path) to
	// requests for exactly "/" (app-root).
	AppRoot string `json:"appRoot,omitempty"`
	// UpstreamHost, when set, replaces the Host header the backend sees
	// (upstream-vhost); routing has already used the client's.
	UpstreamHost string `json:"upstreamHost,omitempty"`
	// Redirect, when set, answers every request with a Location built
	// from its parts and the request's (Gateway API RequestRedirect).
	Redirect *Redirect `json:"redirect,omitempty"`
	// RequestHeaders are applied in order to the request before it is
	// sent to the pool (after the checks above, before UpstreamHost);
	// ResponseHeaders in order to the pool's response (not to answers
	// HAProxy makes itself: redirects, 403, 503).
	RequestHeaders  []HeaderOp `json:"requestHeaders,omitempty"`
	ResponseHeaders []HeaderOp `json:"responseHeaders,omitempty"`
	// PrefixRewrite, when set (instead of RewritePath), replaces the
	// matched path prefix, keeping the rest of the path and the query
	// string (Gateway API URLRewrite ReplacePrefixMatch).
	PrefixRewrite *PrefixRewrite `json:"prefixRewrite,omitempty"`
	// RewritePath, when set, replaces the request's path (the query
	// string is kept) after routing has chosen the pool with the
	// original one (rewrite-target). A path of letters, digits and
	// ._~/- only.
	RewritePath string `json:"rewritePath,omitempty"`
	// StripPrefix, when set, makes RewritePath (then ending with "/")
	// replace only StripPrefix and the "/" after it, keeping the rest of
	// the path (rewrite-target "<path>/$2" with the path
	// "<prefix>(/|$)(.*)"): /prefix/rest becomes RewritePath + "rest". A
	// path of letters, digits and ._~/- not ending with "/".
	StripPrefix string `json:"stripPrefix,omitempty"`
	// RewriteRegex, when set (instead of StripPrefix), makes RewritePath
	// a target holding $1 to $9, the capture groups of RewriteRegex (the
	// route's PATH REGEX value): the whole path matching it is replaced
	// by RewritePath with the groups expanded, the query string kept
	// (rewrite-target with use-regex).
	RewriteRegex string `json:"rewriteRegex,omitempty"`
	// ForwardedPrefix, when set, is sent to the backend as the
	// X-Forwarded-Prefix header (x-forwarded-prefix), replacing any the
	// client sent; a path of letters, digits and ._~/- only.
	ForwardedPrefix string `json:"forwardedPrefix,omitempty"`
	// CORS, when set, answers CORS preflights itself and adds
	// Access-Control-Allow-Origin to responses (enable-cors).
	CORS *CORS `json:"cors,omitempty"`
	// BasicAuth, when set, answers 401 to requests without the
	// credentials of one of its users (auth-type: basic). It comes after
	// the CORS preflight and before the body size.
	BasicAuth *BasicAuth `json:"basicAuth,omitempty"`
	// ExternalAuth, when set, asks an auth Service about every request
	// first (auth-url): 2xx lets it through, 401 and 403 are answered,
	// anything else is 500. It comes after BasicAuth.
	ExternalAuth *ExternalAuth `json:"externalAuth,omitempty"`
	// RateLimit, when set, answers 503 to a client address over its
	// limits (limit-rps, limit-rpm, limit-connections). It comes after
	// the redirects and app root, before the source checks.
	RateLimit *RateLimit `json:"rateLimit,omitempty"`
	// DefaultBackend, when set, sends the policy's requests to another
	// pool while the policy's own has no usable member (default-backend).
	DefaultBackend *DefaultBackend `json:"defaultBackend,omitempty"`
	// CustomErrors, when set, replaces the body of the policy's answers
	// whose status is listed with a page fetched from another pool
	// (custom-http-errors), keeping the status. It applies to the
	// answer, after every request rule.
	CustomErrors *CustomErrors `json:"customErrors,omitempty"`
	// Canary, when set, sends some requests of the policy to another
	// pool (a canary Ingress with the same host and path).
	Canary *Canary `json:"canary,omitempty"`
	// Split, when set, sends each request of the policy to one of its
	// pools, chosen at random by weight (an HTTPRoute rule whose
	// backendRefs carry filters: a pool for each). It comes where the
	// Canary does; the policy's own pool is the first.
	Split *Split `json:"split,omitempty"`
}

// Split is a weighted choice of pools. FailWeight of every total (the
// pools' weights and FailWeight) requests are answered 500 (backendRefs
// that do not resolve, as Pool.FailWeight).
type Split struct {
	Pools      []PoolShare `json:"pools"`
	FailWeight int         `json:"failWeight,omitempty"`
}

// PoolShare is one pool of a Split and its weight (1-1,000,000).
type PoolShare struct {
	PoolID string `json:"poolId"`
	Weight int    `json:"weight"`
}

// ExternalAuth is ingress-nginx's auth-url: each request is first sent,
// headers only, with Method to Path on PoolID (a Service of the
// Ingress's namespace), with Host. A 2xx answer lets it through with
// ResponseHeaders copied from the answer (and removed from the request
// when the answer lacks them); 401 is answered 401, or 302 to SigninURL
// with rd= the request's URL when set; 403 is 403; anything else,
// the Service unreachable included, 500.
type ExternalAuth struct {
	PoolID          string   `json:"poolId"`
	Host            string   `json:"host"`
	Path            string   `json:"path"`
	Method          string   `json:"method"`
	SigninURL       string   `json:"signinUrl,omitempty"`
	ResponseHeaders []string `json:"responseHeaders,omitempty"`
}

// DefaultBackend is ingress-nginx's default-backend annotation: while
// RoutePoolID (the policy's own pool) has no usable member, its requests
// go to PoolID. RoutePoolID is carried so that the rule names the pool it
// watches, and two policies of one Ingress to different Services get
// different profiles.
type DefaultBackend struct {
	PoolID      string `json:"poolId"`
	RoutePoolID string `json:"routePoolId"`
}

// CustomErrors is ingress-nginx's custom-http-errors: an answer whose
// status is one of Codes (400-599, at most MaxCustomErrorCodes) is
// replaced by the answer of PoolID (the default-backend Service) to a
// GET / carrying X-Code, X-Format, X-Original-URI, X-Namespace,
// X-Ingress-Name, X-Service-Name, X-Service-Port and X-Request-ID (the
// request's own, when it has one), with the original status. Namespace,
// Ingress, Service and ServicePort are what those headers carry (the
// route's Service, its port a number or a name as the Ingress names it);
// when PoolID cannot answer, the original answer is kept.
type CustomErrors struct {
	PoolID      string `json:"poolId"`
	Codes       []int  `json:"codes"`
	Namespace   string `json:"namespace"`
	Ingress     string `json:"ingress"`
	Service     string `json:"service"`
	ServicePort string `json:"servicePort"`
}

// MaxCustomErrorCodes bounds CustomErrors.Codes.
const MaxCustomErrorCodes = 32

// Canary is ingress-nginx's canary: a request goes to PoolID when its
// Header is "always" (or equals HeaderValue, when set), else when its
// Cookie is "always", else with probability Weight/WeightTotal; a Header
// or Cookie "never" keeps it on the policy's own pool.
type Canary struct {
	PoolID      string `json:"poolId"`
	Weight      int    `json:"weight,omitempty"`
	WeightTotal int    `json:"weightTotal"`
	Header      string `json:"header,omitempty"`
	HeaderValue string `json:"headerValue,omitempty"`
	// HeaderPattern, when set (never with HeaderValue), is a regular
	// expression (encode.ParseValueRegex's subset) searched in Header's
	// value: a match sends the request to the canary.
	HeaderPattern string `json:"headerPattern,omitempty"`
	Cookie        string `json:"cookie,omitempty"`
	// Source is the canary Ingress.
	Source Source `json:"source"`
}

// RateLimit bounds what one client address may ask of a policy; 0 is no
// limit. Requests count once accepted, over a sliding second or minute;
// Connections counts requests in progress at once.
type RateLimit struct {
	RequestsPerSecond int `json:"requestsPerSecond,omitempty"`
	RequestsPerMinute int `json:"requestsPerMinute,omitempty"`
	Connections       int `json:"connections,omitempty"`
}

// BasicAuth references the Secret holding the users of auth-type: basic.
// As for a Certificate, the users and their hashes are not copied into
// the LoadBalancer: the agent fetches the Secret, reads it again
// (package htpasswd) and renders it only when its digest is SHA256.
type BasicAuth struct {
	// Realm is the realm of WWW-Authenticate (encode.Realm).
	Realm     string `json:"realm"`
	Namespace string `json:"namespace"`
	Secret    string `json:"secret"`
	// Type is htpasswd.TypeFile or htpasswd.TypeMap.
	Type   string `json:"type"`
	SHA256 string `json:"sha256"`
}

// CORS is ingress-nginx's enable-cors: a preflight (OPTIONS) from an
// allowed origin is answered 204 with the Access-Control headers, and
// responses to an allowed origin carry Access-Control-Allow-Origin.
type CORS struct {
	// AllowOrigins is either ["*"] (any origin, answered "*") or exact,
	// lowercase origins "scheme://host[:port]" and wildcard ones
	// "scheme://*" or "scheme://*.host[:port]" (encode.OriginPattern);
	// the request's Origin is echoed back only when it matches one.
	AllowOrigins []string `json:"allowOrigins"`
	// AllowMethods are method tokens (uppercase letters), AllowHeaders
	// header names, both sent in a preflight's answer.
	AllowMethods []string `json:"allowMethods"`
	AllowHeaders []string `json:"allowHeaders"`
	// ExposeHeaders, header names, are sent as
	// Access-Control-Expose-Headers on responses to an allowed origin and
	// on preflights (Gateway API CORS exposeHeaders); AllowHeaders may then be empty,
	// which leaves Access-Control-Allow-Headers out.
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// EchoRequestMethod and EchoRequestHeaders (Gateway API CORS "*"
	// in allowMethods or allowHeaders) answer a preflight with the
	// method and headers it asks for (Access-Control-Request-Method and
	// -Headers, when they are well-formed tokens) rather than the lists,
	// which the spec wants with credentials, where "*" is no wildcard.
	// AllowMethods stays the whole list (what an agent that does not
	// know these fields answers); AllowHeaders may be empty.
	EchoRequestMethod  bool `json:"echoRequestMethod,omitempty"`
	EchoRequestHeaders bool `json:"echoRequestHeaders,omitempty"`
	// RefuseOtherPreflights answers 403, without CORS headers, a
	// preflight (OPTIONS with Origin and Access-Control-Request-Method)
	// from an origin not allowed (Gateway API CORS); without it that
	// preflight goes to the pool, as ingress-nginx's enable-cors does.
	RefuseOtherPreflights bool `json:"refuseOtherPreflights,omitempty"`
	// AllowCredentials sends Access-Control-Allow-Credentials: true.
	AllowCredentials bool `json:"allowCredentials,omitempty"`
	// MaxAgeSeconds is the preflight's Access-Control-Max-Age.
	MaxAgeSeconds int `json:"maxAgeSeconds"`
}

// HeaderOpKind is what a HeaderOp does.
type HeaderOpKind string

const (
	// HeaderSet replaces every line of the header by one with Value
	// (adds it when absent).
	HeaderSet HeaderOpKind = "set"
	// HeaderAdd adds a line with Value, keeping those already there.
	HeaderAdd HeaderOpKind = "add"
	// HeaderRemove removes every line of the header.
	HeaderRemove HeaderOpKind = "remove"
)

// HeaderOp is one change to a request's or response's headers. Name is
// a header name (letters, digits and '-'; matched case-insensitively),
// Value a header value (printable ASCII without \ or $, not both kinds
// of quote, no leading or trailing space: encode.HeaderSetValue), empty
// for HeaderRemove. Neither is ever
// interpreted: a value is sent as written. Names that frame the message
// or the connection (Content-Length, Transfer-Encoding, Connection,
// Host, ...) are refused.
type HeaderOp struct {
	Op    HeaderOpKind `json:"op"`
	Name  string       `json:"name"`
	Value string       `json:"value,omitempty"`
}

// PrefixRewrite replaces Prefix, the policy's PathPrefix rule (no
// trailing "/"; "" for "/"), by Replacement (no trailing "/"; "" for
// "/"): /prefix/rest becomes Replacement + /rest, and /prefix becomes
// Replacement, or "/" when that is empty. Both are paths of letters,
// digits and ._~/- only. The query string is kept.
type PrefixRewrite struct {
	Prefix      string `json:"prefix"`
	Replacement string `json:"replacement"`
}

// Redirect is a redirect whose Location is composed from typed parts
// and the request: Scheme ("http" or "https") "://" Host (the request's
// Host header without its port when empty) ":" Port (left out when 0),
// then the request's path, replaced by FullPath when set or rewritten
// by PrefixRewrite, and its query string. Code is 301, 302, 303, 307 or
// 308.
type Redirect struct {
	Scheme        string         `json:"scheme"`
	Host          string         `json:"host,omitempty"`
	Port          int            `json:"port,omitempty"`
	FullPath      string         `json:"fullPath,omitempty"`
	PrefixRewrite *PrefixRewrite `json:"prefixRewrite,omitempty"`
	Code          int            `json:"code"`
}
