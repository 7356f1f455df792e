package render

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// cookieView is a pool's model.CookieAffinity, validated again: the
// model may come from a store, not from translation.
type cookieView struct {
	name   encode.Word
	maxAge int // seconds, 0: a session cookie
	// maxLife and maxIdle are HAProxy's maxlife (maxAge when set) and
	// maxidle, seconds; 0 for none.
	maxLife, maxIdle int
	secure           bool // SameSite=None: browsers drop such a cookie without Secure
	attrs            []encode.Word
	// httpsRegex, when valid, matches the cookie's Set-Cookie value:
	// Secure is added on responses to HTTPS requests only.
	httpsRegex encode.Word
}

// maxCookieAge bounds MaxAgeSeconds as translation does (ten years).
const maxCookieAge = 10 * 365 * 24 * 3600

func cookieOf(a *model.CookieAffinity) (*cookieView, error) {
	if a == nil {
		return nil, nil
	}
	name, err := encode.CookieName(a.Name)
	if err != nil {
		return nil, err
	}
	v := &cookieView{name: name.Word(), maxAge: a.MaxAgeSeconds}
	if a.Path != "" {
		p, err := encode.CookiePathAttr(a.Path)
		if err != nil {
			return nil, err
		}
		v.attrs = append(v.attrs, p.Word())
	}
	if a.MaxAgeSeconds < 0 || a.MaxAgeSeconds > maxCookieAge {
		return nil, fmt.Errorf("cookie max age %d is outside 0-%d", a.MaxAgeSeconds, maxCookieAge)
	}
	if a.MaxAgeSeconds > 0 {
		v.attrs = append(v.attrs, encode.Concat(encode.Lit("Max-Age="), encode.Num(a.MaxAgeSeconds)))
	}
	if v.maxLife, v.maxIdle, err = cookieLifetimes(a); err != nil {
		return nil, err
	}
	switch a.SameSite {
	case "":
	case "None":
		v.attrs, v.secure = append(v.attrs, encode.Lit("SameSite=None")), true
	case "Lax":
		v.attrs = append(v.attrs, encode.Lit("SameSite=Lax"))
	case "Strict":
		v.attrs = append(v.attrs, encode.Lit("SameSite=Strict"))
	default:
		return nil, fmt.Errorf("cookie SameSite %s is not None, Lax or Strict", encode.Printable(a.SameSite))
	}
	switch a.Secure {
	case model.CookieSecureAlways:
		v.secure = true
	case model.CookieSecureNever:
	case "":
		if !v.secure {
			if v.httpsRegex, err = encode.SetCookieRegex(a.Name); err != nil {
				return nil, err
			}
		}
	default:
		return nil, fmt.Errorf("cookie Secure %s is not Always, Never or empty", encode.Printable(string(a.Secure)))
	}
	return v, nil
}

func sameCookie(a, b *cookieView) bool {
	if a == nil || b == nil {
		return a == b
	}
	la, _ := encode.ConfigLine(cookieWords(a)...)
	lb, _ := encode.ConfigLine(cookieWords(b)...)
	return la == lb && (a.httpsRegex.Err() == nil) == (b.httpsRegex.Err() == nil)
}

// writeCookie renders the backend's cookie line: inserted by HAProxy,
// indirect (the server never sees it), nocache (a shared cache must not
// keep a response that sets it), httponly as ingress-nginx's. HAProxy
// always writes "path=/"; a Path attribute comes after it, and a browser
// takes the last Path (RFC 6265 5.3). maxlife makes HAProxy itself
// ignore a cookie older than Max-Age, which a client could keep.
//
// Secure on HTTPS only (ingress-nginx's default) cannot be a keyword of
// the cookie line, which holds for every response of the backend: the
// inserted Set-Cookie gets "; Secure" appended when the client's
// connection is TLS. http-after-response runs after HAProxy inserted it
// (http-response rules run before).
func writeCookie(c *encode.Config, v *cookieView) {
	c.Line(cookieWords(v)...)
	if v.httpsRegex.Err() == nil {
		c.Line(encode.Lit("http-after-response"), encode.Lit("replace-header"), encode.Lit("Set-Cookie"), v.httpsRegex,
			encode.Lit("\\1; Secure"), ifWord, openBrace, encode.Lit("ssl_fc"), closeBrace)
	}
}

func cookieWords(v *cookieView) []encode.Word {
	words := []encode.Word{encode.Lit("cookie"), v.name, encode.Lit("insert"), encode.Lit("indirect"),
		encode.Lit("nocache"), encode.Lit("httponly")}
	if v.secure {
		words = append(words, encode.Lit("secure"))
	}
	if v.maxLife > 0 {
		words = append(words, encode.Lit("maxlife"), encode.Concat(encode.Num(v.maxLife), encode.Lit("s")))
	}
	if v.maxIdle > 0 {
		words = append(words, encode.Lit("maxidle"), encode.Concat(encode.Num(v.maxIdle), encode.Lit("s")))
	}
	for _, a := range v.attrs {
		words = append(words, encode.Lit("attr"), a)
	}
	return words
}

// cookieLifetimes are the cookie's maxlife (its Max-Age, else
// MaxLifeSeconds: never both) and maxidle.
func cookieLifetimes(a *model.CookieAffinity) (int, int, error) {
	for _, n := range []int{a.MaxLifeSeconds, a.MaxIdleSeconds} {
		if n < 0 || n > maxCookieAge {
			return 0, 0, fmt.Errorf("cookie lifetime %d is outside 0-%d", n, maxCookieAge)
		}
	}
	if a.MaxAgeSeconds > 0 && a.MaxLifeSeconds > 0 {
		return 0, 0, errors.New("cookie with both a Max-Age and a max life")
	}
	return max(a.MaxAgeSeconds, a.MaxLifeSeconds), a.MaxIdleSeconds, nil
}
