package encode

import (
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"strings"
)

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

// FullHeaderSample makes the fetch "req.fhdr(<name>)": the header's
// last occurrence whole, commas included, as HTTPRoute header matches
// compare it. name must pass HeaderName.
func FullHeaderSample(name string) Word {
	if _, err := HeaderName(name); err != nil {
		return Word{err: err}
	}
	return Word{s: "req.fhdr(" + name + ")", kind: kindIdent}
}

var queryNameChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-")

// QueryParamSample makes the fetch "url_param(<name>)" for a query
// parameter named by a user: 1-256 letters, digits and "._~-", nothing
// the argument parser reads as syntax (no ',', ')', quote or space).
func QueryParamSample(name string) Word {
	const k = "query parameter name"
	if name == "" || len(name) > 256 {
		return Word{err: refuse(k, "length", name, "must be 1-256 bytes")}
	}
	for i := 0; i < len(name); i++ {
		if !queryNameChars[name[i]] {
			return Word{err: refuse(k, "charset", name, "contains "+describeByte(name[i])+"; allowed are letters, digits and ._~-")}
		}
	}
	return Word{s: "url_param(" + name + ")", kind: kindIdent}
}

var queryValueChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~!*+:@/-")

// QueryValue validates a value a query parameter is compared with: 1-1024
// letters, digits and "._~!*+:@/-" (translate's allow-list): no '%',
// so the raw value HAProxy reads is the value compared, and no '?',
// where HAProxy 2.6's url_param ends a value ("?id=a?b" gives "a").
func QueryValue(s string) (Value, error) {
	const k = "query parameter value"
	if s == "" || len(s) > 1024 {
		return Value{}, refuse(k, "length", s, "must be 1-1024 bytes")
	}
	for i := 0; i < len(s); i++ {
		if !queryValueChars[s[i]] {
			return Value{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; allowed are letters, digits and ._~!*+:@/-")
		}
	}
	return Value{s}, nil
}

// ValueHash is the upper-case hex SHA-1 of a validated value, what
// "<fetch>,sha1,hex" gives HAProxy for a request's value: an ACL can
// compare a header or query value of any length (4 KiB headers) in 40
// bytes, and the value itself never reaches the file.
func ValueHash(v Value) Word {
	if v.s == "" {
		return Word{err: errors.New("encode: zero Value")}
	}
	sum := sha1.Sum([]byte(v.s))
	return Word{s: strings.ToUpper(hex.EncodeToString(sum[:])), kind: kindIdent}
}

// MatchKey makes the key of a header, query or method map entry: group
// (an identifier word) followed by the upper-case hex SHA-1 of each value,
// which is what "<fetch>,sha1,hex" gives HAProxy for the request's value.
// Hashing makes any value a key of fixed length without a space or '#'.
func MatchKey(group Word, values ...string) Word {
	if err := group.Err(); err != nil {
		return Word{err: err}
	}
	if group.kind != kindIdent {
		return Word{err: errors.New("encode: a match key's group must be an identifier")}
	}
	var b strings.Builder
	b.WriteString(group.s)
	for _, v := range values {
		sum := sha1.Sum([]byte(v))
		b.WriteString(strings.ToUpper(hex.EncodeToString(sum[:])))
	}
	return Word{s: b.String(), kind: kindIdent}
}
