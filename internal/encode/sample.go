package encode

// HeaderSample makes the fetch "req.hdr(<name>)" for a request header
// named by a user: name must pass HeaderName (letters, digits and '-'),
// so it holds nothing the argument parser reads as syntax.
func HeaderSample(name string) Word {
	if _, err := HeaderName(name); err != nil {
		return Word{err: err}
	}
	return Word{s: "req.hdr(" + name + ")", kind: kindIdent}
}

// CookieSample makes the fetch "req.cook(<name>)" for a cookie named by
// a user: name must pass CookieName (letters, digits, '_' and '-').
func CookieSample(name string) Word {
	if _, err := CookieName(name); err != nil {
		return Word{err: err}
	}
	return Word{s: "req.cook(" + name + ")", kind: kindIdent}
}

var plainValueChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ._~:/+=@-")

// PlainValue validates a value a request header is compared with: a
// HeaderValue of letters, digits, inner spaces and "._~:/+=@-" only, at
// most 256 bytes (no list or parameter separators such as ',' or ';').
func PlainValue(s string) (Value, error) {
	const k = "value"
	if len(s) > 256 {
		return Value{}, refuse(k, "length", s, "is "+itoa(len(s))+" bytes, the limit is 256")
	}
	if _, err := HeaderValue(s); err != nil {
		return Value{}, err
	}
	for i := 0; i < len(s); i++ {
		if !plainValueChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits, spaces and ._~:/+=@-")
		}
	}
	return Value{s}, nil
}

// SNIString makes the expression "str(<host>)" of a server's sni keyword
// for a host name a user gave: host must pass Host (lowercase letters,
// digits, '.' and '-'), so it holds nothing the argument parser reads as
// syntax.
func SNIString(host string) (Word, error) {
	if _, err := Host(host); err != nil {
		return Word{}, err
	}
	return Word{s: "str(" + host + ")", kind: kindIdent}, nil
}
