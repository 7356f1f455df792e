// Package encode is the only way a value reaches a HAProxy file or the
// HAProxy runtime API: user-derived text never reaches either through
// fmt or a template, never inside double quotes (where HAProxy expands
// '$' and '\'), and map and runtime payloads get the same allow-lists as
// config words.
//
// Two layers. Validators (Host, Path, HeaderValue, URL, IP, ...) hold
// anchored allow-lists and return a Value, which only this package can
// build. Emitters (Config, MapLine, CrtListLine, the runtime Commands)
// accept only Words, and a Word comes either from a validated Value (always
// written single-quoted in config files), from pier's own identifiers and
// numbers, or from a Go constant via Lit: Lit's parameter has an unexported
// type, so only an untyped constant converts to it and a string variable
// does not compile. Each emitter checks every Word again for its context
// and refuses rather than trusts.
package encode

import (
	"errors"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

type kind uint8

const (
	kindLit   kind = iota + 1 // a Go constant
	kindIdent                 // built from pier's identifiers
	kindNum                   // a formatted integer or duration
	kindAddr                  // an IP address or address:port from net/netip
	kindFile                  // an absolute, clean file path from configuration
	kindUser                  // a validated user-derived Value
)

// Word is one argument of an emitted line. The zero Word is invalid.
// A Word built from bad input carries its error; emitters report it.
type Word struct {
	s     string
	kind  kind
	quote bool
	// dquote: written double-quoted in config lines, the only way to
	// write a single quote without an escape (HeaderSetWord).
	dquote bool
	err    error
}

// String returns the word's text, unquoted.
func (w Word) String() string { return w.s }

// Err reports why the word cannot be emitted, if it cannot.
func (w Word) Err() error {
	if w.kind == 0 && w.err == nil {
		return errors.New("encode: zero Word")
	}
	return w.err
}

// keyword is deliberately unexported: an untyped string constant converts
// to it implicitly, a string variable cannot be converted outside this
// package. That makes Lit("option") compile and Lit(ing.Name) not.
type keyword string

// Lit makes a word from a Go constant. A constant containing a space or
// another character the config tokenizer treats specially is emitted
// single-quoted; one containing a single quote, a control character or
// non-ASCII is an error.
func Lit(s keyword) Word {
	w := Word{s: string(s), kind: kindLit}
	if err := quotable(w.s); err != nil {
		w.err = err
	}
	w.quote = !isBare(w.s)
	return w
}

// Word makes the word for a validated value: single-quoted in config
// lines, where nothing is interpreted between single quotes.
func (v Value) Word() Word {
	if v.s == "" {
		return Word{err: errors.New("encode: zero Value")}
	}
	return Word{s: v.s, kind: kindUser, quote: true}
}

// idChars is what pier's identifiers (model IDs and UUIDs) are made of.
// No '_': pier joins identifiers with '_' when it composes names.
var idChars = charset("abcdefghijklmnopqrstuvwxyz0123456789-")

// ID makes a name from a constant prefix and one of pier's identifiers
// (a model ID, a UUID): "be_" + pool.ID. The identifier must be 1-64
// lowercase letters, digits or '-', not starting with '-'.
func ID(prefix keyword, id string) Word {
	w := Word{s: string(prefix) + id, kind: kindIdent}
	if id == "" || len(id) > 64 || id[0] == '-' {
		w.err = refuse("identifier", "syntax", id, "must be 1-64 characters and not start with '-'")
		return w
	}
	for i := 0; i < len(id); i++ {
		if !idChars[id[i]] {
			w.err = refuse("identifier", "charset", id, "contains "+describeByte(id[i])+"; identifiers are lowercase letters, digits and '-'")
			return w
		}
	}
	if prefix != "" && !isBare(string(prefix)) {
		w.err = refuse("identifier", "prefix", string(prefix), "prefix must be bare")
	}
	return w
}

// Num makes a word from an integer.
func Num(n int) Word { return Word{s: strconv.Itoa(n), kind: kindNum} }

// Num64 makes a word from a 64-bit integer (byte sizes).
func Num64(n int64) Word { return Word{s: strconv.FormatInt(n, 10), kind: kindNum} }

// Millis makes a HAProxy time word in the largest unit that divides it
// ("1h", "30s", "1500ms"). Sub-millisecond parts are dropped; negative is
// an error.
func Millis(d time.Duration) Word {
	w := Word{kind: kindNum}
	if d < 0 {
		w.err = refuse("duration", "range", d.String(), "must not be negative")
		return w
	}
	d = d.Truncate(time.Millisecond)
	if d == 0 {
		w.s = "0s"
		return w
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d%u.d == 0 {
			w.s = strconv.FormatInt(int64(d/u.d), 10) + u.name
			return w
		}
	}
	return w
}

// Addr makes a word from an address (from IP, or pier's own).
func Addr(a netip.Addr) Word {
	if !a.IsValid() || a.Zone() != "" {
		return Word{err: refuse("IP address", "syntax", a.String(), "invalid or zoned address")}
	}
	return Word{s: a.String(), kind: kindAddr}
}

// Prefix makes a word from a masked prefix (from CIDR): "10.0.0.0/8".
func Prefix(p netip.Prefix) Word {
	if !p.IsValid() || p.Addr().Zone() != "" || p != p.Masked() {
		return Word{err: refuse("CIDR", "syntax", p.String(), "invalid, zoned or unmasked prefix")}
	}
	return Word{s: p.String(), kind: kindAddr}
}

// LogFormatURL validates s as URL does and makes the word for a
// log-format argument (a redirect location): there '%' starts a sample
// fetch and "%%" is a literal '%' (HAProxy 2.6.12, render's integration
// test). The word is single-quoted, so '$' is not expanded either. Only
// a URL in the form URL returns is accepted.
func LogFormatURL(s string) (Word, error) {
	v, err := URL(s)
	if err != nil {
		return Word{}, err
	}
	if v.s != s {
		return Word{}, refuse("URL", "canonical", s, "is not in canonical form")
	}
	if w := v.LogFormatWord(); w.Err() != nil {
		return Word{}, w.Err()
	}
	return v.LogFormatWord(), nil
}

// LogFormatWord makes the word for a validated value (a path, a host, a
// URL) placed in a log-format argument (redirect location, set-header):
// '%' is doubled, and the word is single-quoted. A value holding a
// backslash is refused: no validator of ours lets one through, and
// HAProxy's log-format parser is not documented to leave it alone.
func (v Value) LogFormatWord() Word {
	if strings.Contains(v.s, "\\") {
		return Word{err: refuse("value", "log-format", v.s, "contains a backslash")}
	}
	w := v.Word()
	w.s = strings.ReplaceAll(v.s, "%", "%%")
	return w
}

// HeaderSetWord makes the word for a HeaderSetValue placed in a
// log-format argument (set-header, add-header): LogFormatWord's, '%'
// doubled, single-quoted, or double-quoted when the value holds a single
// quote. HeaderSetValue refused what double quotes
// interpret ('"', '\', '$'), so either form reaches HAProxy with no
// escape or variable. The word is for config lines only: map files, the
// runtime API and crt-lists refuse a single quote.
func (v Value) HeaderSetWord() Word {
	if _, err := HeaderSetValue(v.s); err != nil {
		return Word{err: err}
	}
	w := v.LogFormatWord()
	w.dquote = strings.Contains(v.s, "'")
	return w
}

// AddrPort makes "10.0.0.1:80" or "[2001:db8::1]:80".
func AddrPort(a netip.Addr, port int) Word {
	w := Addr(a)
	if _, err := Port(port); err != nil {
		w.err = err
	}
	if w.err == nil {
		w.s = netip.AddrPortFrom(a, uint16(port)).String()
	}
	return w
}

var fileChars = charset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/+-")

// FilePath makes a word from a path in pier's own configuration (state
// folder, socket, certificate file). It must be absolute and clean, and is
// limited to letters, digits and ._/+- so it is safe unquoted in every
// file format pier writes (config, crt-list).
func FilePath(p string) Word {
	w := Word{s: p, kind: kindFile}
	switch {
	case p == "" || len(p) > 1024 || !filepath.IsAbs(p):
		w.err = refuse("file path", "absolute", p, "must be an absolute path of at most 1024 bytes")
	case filepath.Clean(p) != p:
		w.err = refuse("file path", "clean", p, "must be clean (no '..', '//' or trailing '/')")
	}
	for i := 0; w.err == nil && i < len(p); i++ {
		if !fileChars[p[i]] {
			w.err = refuse("file path", "charset", p, "contains "+describeByte(p[i])+"; allowed are letters, digits and ._/+-")
		}
	}
	return w
}

// Account makes a word from a system user or group name.
func Account(name string) Word {
	w := Word{s: name, kind: kindIdent}
	ok := name != "" && len(name) <= 32 && (name[0] == '_' || ('a' <= name[0] && name[0] <= 'z'))
	for i := 0; ok && i < len(name); i++ {
		ok = accountChars[name[i]]
	}
	if !ok {
		w.err = refuse("account", "syntax", name, "must match ^[a-z_][a-z0-9_-]{0,31}$")
	}
	return w
}

var accountChars = charset("abcdefghijklmnopqrstuvwxyz0123456789_-")

// Concat joins words that are not user-derived into one ("be_x" "/" "s3").
// A user-derived part makes the result an error: user values are always
// whole, quoted words.
func Concat(parts ...Word) Word {
	var b strings.Builder
	for _, p := range parts {
		if err := p.Err(); err != nil {
			return Word{err: err}
		}
		if p.kind == kindUser || p.quote {
			return Word{err: errors.New("encode: Concat of a user value or quoted constant " + Printable(p.s))}
		}
		b.WriteString(p.s)
	}
	return Word{s: b.String(), kind: kindIdent}
}

// isBare reports whether s is one config word without quoting: printable
// ASCII, none of the characters the HAProxy tokenizer interprets.
func isBare(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"'#\$`, c) >= 0 {
			return false
		}
	}
	return true
}

// quotable reports whether s can be written between single quotes:
// nothing is interpreted there, but there is no way to write a single
// quote or end of line inside, and pier refuses all control bytes.
func quotable(s string) error {
	if s == "" {
		return errors.New("encode: empty word")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\'' || c < 0x20 || c >= 0x7f {
			return refuse("word", "quotable", s, "contains "+describeByte(c)+", which cannot be single-quoted")
		}
	}
	return nil
}

// dquotable reports whether s can be written between double quotes with
// nothing interpreted: no '"', '\' or '$' (variables), and no control
// byte or non-ASCII.
func dquotable(s string) error {
	if s == "" {
		return errors.New("encode: empty word")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c == '$' || c < 0x20 || c >= 0x7f {
			return refuse("word", "quotable", s, "contains "+describeByte(c)+", which cannot be double-quoted")
		}
	}
	return nil
}
