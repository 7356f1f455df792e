package encode

import (
	"net/netip"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Value is a user-derived string that passed one of the validators below.
// Only this package can build one, so a Value in a caller's hands is proof
// that the allow-list ran. Emit it with Value.Word.
type Value struct{ s string }

// String returns the validated value as it is (unquoted).
func (v Value) String() string { return v.s }

// Length limits. Hosts follow DNS; the path limit is pier's, well
// under HAProxy's buffer size so a request line with it still fits.
const (
	MaxHostLen        = 253
	MaxLabelLen       = 63
	MaxPathLen        = 1024
	MaxHeaderNameLen  = 128
	MaxHeaderValueLen = 4096
	MaxURLLen         = 2048
)

// asciiText is the first layer of every string validator: not empty,
// bounded, valid UTF-8, ASCII only, no control characters.
func asciiText(kind, s string, max int) error {
	if s == "" {
		return refuse(kind, "empty", s, "must not be empty")
	}
	if len(s) > max {
		return refuse(kind, "length", s, "is "+itoa(len(s))+" bytes, the limit is "+itoa(max))
	}
	if !utf8.ValidString(s) {
		return refuse(kind, "utf8", s, "is not valid UTF-8")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return refuse(kind, "ascii", s, "contains non-ASCII characters; only ASCII is accepted (IDNs must be punycode, xn--)")
		}
		if c < 0x20 || c == 0x7f {
			return refuse(kind, "control", s, "contains "+describeByte(c)+"; control characters are refused")
		}
	}
	return nil
}

// Host validates an exact host name (Ingress rules[].host, TLS hosts):
// lowercase DNS-1123 subdomain, no IP, no port, no wildcard.
func Host(s string) (Value, error) {
	if err := hostName("host", s); err != nil {
		return Value{}, err
	}
	return Value{s}, nil
}

// WildcardHost validates "*.<host>": the wildcard covers exactly one label,
// as Kubernetes defines it. "*" alone and "*.*.x" are refused; "*.com" is
// accepted because the apiserver accepts it.
func WildcardHost(s string) (Value, error) {
	const kind = "wildcard host"
	if err := asciiText(kind, s, MaxHostLen); err != nil {
		return Value{}, err
	}
	rest, ok := strings.CutPrefix(s, "*.")
	if !ok {
		return Value{}, refuse(kind, "wildcard", s, `must start with "*." followed by a host name`)
	}
	if err := hostName(kind, rest); err != nil {
		e := err.(*Error)
		e.Value = Printable(s)
		return Value{}, e
	}
	if errs := validation.IsWildcardDNS1123Subdomain(s); len(errs) > 0 {
		return Value{}, refuse(kind, "dns1123", s, dns1123Msg)
	}
	return Value{s}, nil
}

// HostSuffix validates a Gateway API wildcard "*.<host>" (one or more
// labels) as WildcardHost does and returns its suffix ".<host>", what
// the request host must end with.
func HostSuffix(s string) (Value, error) {
	v, err := WildcardHost(s)
	if err != nil {
		return Value{}, err
	}
	return Value{v.s[1:]}, nil
}

// dns1123Msg replaces apimachinery's message, which is long enough to
// crowd an Event.
const dns1123Msg = "must be a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', each label starting and ending with a letter or digit"

func hostName(kind, s string) error {
	if err := asciiText(kind, s, MaxHostLen); err != nil {
		return err
	}
	if strings.ContainsRune(s, '*') {
		return refuse(kind, "wildcard", s, `a wildcard is only allowed as the whole first label ("*.example.com")`)
	}
	if strings.ContainsRune(s, ':') || strings.HasPrefix(s, "[") {
		if _, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
			return refuse(kind, "ip", s, "must be a DNS name, not an IP address")
		}
		return refuse(kind, "port", s, "must not contain a port or a colon")
	}
	if _, err := netip.ParseAddr(s); err == nil {
		return refuse(kind, "ip", s, "must be a DNS name, not an IP address")
	}
	if strings.ToLower(s) != s {
		return refuse(kind, "lowercase", s, "must be lowercase; pier refuses upper case instead of lowercasing it for you")
	}
	for _, label := range strings.Split(s, ".") {
		if len(label) > MaxLabelLen {
			return refuse(kind, "label-length", s, "has a label longer than 63 bytes")
		}
	}
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return refuse(kind, "dns1123", s, dns1123Msg)
	}
	return nil
}

// PathKind is the Ingress pathType a path is validated for.
// ImplementationSpecific is validated (and matched) as PathPrefix.
type PathKind int

const (
	PathExact PathKind = iota + 1
	PathPrefix
)

// pathChars is RFC 3986 pchar plus '/', minus the single quote, so
// strong quoting needs no escape.
var pathChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!$&()*+,;=:@%/-")

// Path validates an Ingress path. Besides the allow-list it applies the
// apiserver's sequence rules to every path type and refuses percent
// escapes that hide a separator, a dot segment or a control byte.
func Path(s string, kind PathKind) (Value, error) {
	const k = "path"
	if kind != PathExact && kind != PathPrefix {
		return Value{}, refuse(k, "kind", s, "unknown path type")
	}
	if err := asciiText(k, s, MaxPathLen); err != nil {
		return Value{}, err
	}
	if s[0] != '/' {
		return Value{}, refuse(k, "absolute", s, `must start with "/"`)
	}
	for i := 0; i < len(s); i++ {
		if !pathChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+`; allowed are letters, digits and ._~!$&()*+,;=:@%/-`)
		}
	}
	if err := percentEscapes(s); err != nil {
		return Value{}, err
	}
	for _, seq := range []string{"//", "/./", "/../"} {
		if strings.Contains(s, seq) {
			return Value{}, refuse(k, "sequence", s, `must not contain "`+seq+`"`)
		}
	}
	if strings.HasSuffix(s, "/.") || strings.HasSuffix(s, "/..") {
		return Value{}, refuse(k, "sequence", s, `must not end with "/." or "/.."`)
	}
	return Value{s}, nil
}

// PathBelow gives the prefix that matches what lies below a Prefix path:
// the path, validated, then "/". It is one byte longer than the path, so
// a path of MaxPathLen bytes has a MaxPathLen+1 byte prefix; the "/" adds
// nothing a config line could misread.
func PathBelow(path string) (Word, error) {
	v, err := Path(path, PathPrefix)
	if err != nil {
		return Word{}, err
	}
	if strings.HasSuffix(v.s, "/") {
		return Word{}, refuse("path", "sequence", path, `a Prefix path's base must not end with "/"`)
	}
	return Word{s: v.s + "/", kind: kindUser, quote: true}, nil
}

func percentEscapes(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return refuse("path", "percent", s, `"%" must be followed by two hex digits`)
		}
		b := unhex(s[i+1])<<4 | unhex(s[i+2])
		switch {
		case b == 0:
			return refuse("path", "percent-nul", s, "must not contain %00")
		case b < 0x20 || b == 0x7f:
			return refuse("path", "percent-control", s, "must not contain a percent-encoded control character")
		case b == '/' || b == '\\':
			return refuse("path", "percent-slash", s, "must not contain an encoded slash or backslash (%2F, %5C)")
		case b == '.':
			return refuse("path", "percent-dot", s, "must not contain an encoded dot (%2E): it can hide a dot segment")
		}
		i += 2
	}
	return nil
}

// HeaderName validates an HTTP header name: ^[A-Za-z0-9-]+$.
func HeaderName(s string) (Value, error) {
	const k = "header name"
	if err := asciiText(k, s, MaxHeaderNameLen); err != nil {
		return Value{}, err
	}
	for i := 0; i < len(s); i++ {
		if !headerNameChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits and '-'")
		}
	}
	return Value{s}, nil
}

var headerNameChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")

// HeaderValue validates an HTTP header value: printable ASCII, inner
// spaces allowed, no leading or trailing space. Besides the single quote it
// refuses '"', '\', '#', '$' and '%': header values end up in HAProxy
// log-format arguments, where '%' starts an expression, and refusing the
// rest keeps the value meaningful in every quoting context.
func HeaderValue(s string) (Value, error) {
	const k = "header value"
	if err := headerText(k, s); err != nil {
		return Value{}, err
	}
	if i := strings.IndexAny(s, `'"\#$%`); i >= 0 {
		return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+`; ' " \ # $ % are refused`)
	}
	return Value{s}, nil
}

// HeaderSetValue validates the value of a header pier sets (a header
// change: set-header, add-header, written only to config lines through
// HeaderSetWord). It is HeaderValue with single quotes, double quotes,
// '#' and '%' allowed, so that a Content-Security-Policy's 'self' or a
// JSON value can be set; a value may hold single or double quotes but
// not both, as no quoting writes both without an escape. '\' and '$'
// stay refused: HAProxy interprets them in double quotes.
func HeaderSetValue(s string) (Value, error) {
	const k = "header value"
	if err := headerText(k, s); err != nil {
		return Value{}, err
	}
	if i := strings.IndexAny(s, `\$`); i >= 0 {
		return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+`; \ and $ are refused`)
	}
	if strings.Contains(s, "'") && strings.Contains(s, `"`) {
		return Value{}, refuse(k, "quotes", s, "holds both single and double quotes; use one kind")
	}
	return Value{s}, nil
}

// headerText is what every header value is: printable ASCII of at most
// MaxHeaderValueLen bytes, no leading or trailing space.
func headerText(k, s string) error {
	if err := asciiText(k, s, MaxHeaderValueLen); err != nil {
		return err
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return refuse(k, "space", s, "must not start or end with a space")
	}
	return nil
}

func charset(chars string) (set [256]bool) {
	for i := 0; i < len(chars); i++ {
		set[chars[i]] = true
	}
	return set
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// Origin validates a CORS origin: "http://host" or "https://host" with an
// optional port, lowercase, no path, query or anything else, exactly as
// net/url writes it back. Its characters are letters, digits and
// ".-:[]/" only, so it is safe in every quoting context.
func Origin(s string) (Value, error) {
	const k = "origin"
	u, err := URL(s)
	if err != nil {
		return Value{}, err
	}
	scheme, rest, _ := strings.Cut(u.s, "://")
	if u.s != s || strings.ContainsAny(rest, "/?#@%") || (scheme != "http" && scheme != "https") {
		return Value{}, refuse(k, "syntax", s, "must be scheme://host[:port] with nothing after")
	}
	if strings.ToLower(s) != s {
		return Value{}, refuse(k, "case", s, "must be lowercase")
	}
	return Value{s}, nil
}

// Method validates an HTTP method token: 1-20 uppercase letters.
func Method(s string) (Value, error) {
	const k = "method"
	if s == "" || len(s) > 20 || strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return Value{}, refuse(k, "charset", s, "must be 1-20 uppercase letters")
	}
	return Value{s}, nil
}

// JoinList joins validated values with ", " (a header value listing
// methods or header names); each part must be a Method, HeaderName or
// Origin, so the result has no character a quoting context interprets.
func JoinList(vs []Value) (Value, error) {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.s
	}
	return HeaderValue(strings.Join(parts, ", "))
}

// cookieNameChars is an RFC 6265 token narrowed to what ingress-nginx
// users write: no character any quoting context interprets.
var cookieNameChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")

// CookieName validates a session cookie's name: 1-64 letters, digits,
// '_' or '-'.
func CookieName(s string) (Value, error) {
	const k = "cookie name"
	if s == "" || len(s) > 64 {
		return Value{}, refuse(k, "length", s, "must be 1-64 characters")
	}
	for i := 0; i < len(s); i++ {
		if !cookieNameChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits, '_' and '-'")
		}
	}
	return Value{s}, nil
}

// SetCookieRegex is a regular expression matching a whole Set-Cookie
// value of the cookie name (captured as \1), as a config word for
// replace-header. The name is a CookieName: letters, digits, '_' and
// '-', none of which means anything in a regular expression.
func SetCookieRegex(name string) (Word, error) {
	v, err := CookieName(name)
	if err != nil {
		return Word{}, err
	}
	return Word{s: "^(" + v.s + "=.*)$", kind: kindUser, quote: true}, nil
}

var cookiePathChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~/-")

// CookiePathAttr validates a cookie's Path and returns the attribute
// "Path=<path>": a Path of letters, digits and "._~/-" only (no ';',
// which would end the attribute, no '%' or '=').
func CookiePathAttr(s string) (Value, error) {
	const k = "cookie path"
	if _, err := Path(s, PathExact); err != nil {
		return Value{}, err
	}
	for i := 0; i < len(s); i++ {
		if !cookiePathChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits and ._~/-")
		}
	}
	return Value{"Path=" + s}, nil
}
