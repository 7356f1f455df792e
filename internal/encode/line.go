package encode

import (
	"bytes"
	"errors"
	"strings"
)

// MaxLineArgs is HAProxy's MAX_LINE_ARGS: a config line with more words
// is refused, so no tenant's value may add words to a line.
const MaxLineArgs = 64

// Config builds a HAProxy configuration file from Words. The first error
// sticks and is returned by Bytes, so a renderer can emit line after line
// and check once.
type Config struct {
	buf bytes.Buffer
	err error
}

// Section writes an unindented line ("global", "backend be_x").
func (c *Config) Section(words ...Word) { c.line("", words) }

// Line writes an indented line of a section.
func (c *Config) Line(words ...Word) { c.line("    ", words) }

// Blank writes an empty line.
func (c *Config) Blank() { c.buf.WriteByte('\n') }

// Comment writes "# " and words that are not user-derived.
func (c *Config) Comment(words ...Word) {
	for _, w := range words {
		if w.kind == kindUser {
			c.fail(errors.New("encode: user value in a comment"))
			return
		}
	}
	c.line("# ", words)
}

// Bytes returns the file, or the first error met while building it.
func (c *Config) Bytes() ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	return bytes.Clone(c.buf.Bytes()), nil
}

func (c *Config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

func (c *Config) line(indent string, words []Word) {
	s, err := ConfigLine(words...)
	if err != nil {
		c.fail(err)
		return
	}
	c.buf.WriteString(indent)
	c.buf.WriteString(s)
	c.buf.WriteByte('\n')
}

// ConfigLine encodes one config line (without newline): words separated
// by one space, user values and constants that need it single-quoted.
func ConfigLine(words ...Word) (string, error) {
	if len(words) == 0 {
		return "", errors.New("encode: empty line")
	}
	if len(words) > MaxLineArgs {
		return "", errors.New("encode: line has " + itoa(len(words)) + " words, HAProxy accepts at most 64")
	}
	var b strings.Builder
	for i, w := range words {
		if err := w.Err(); err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if err := configWord(&b, w); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

func configWord(b *strings.Builder, w Word) error {
	if w.dquote {
		if err := dquotable(w.s); err != nil {
			return err
		}
		b.WriteByte('"')
		b.WriteString(w.s)
		b.WriteByte('"')
		return nil
	}
	if err := quotable(w.s); err != nil {
		return err
	}
	if !w.quote {
		if !isBare(w.s) {
			return errors.New("encode: unquoted word needs quoting: " + Printable(w.s))
		}
		b.WriteString(w.s)
		return nil
	}
	b.WriteByte('\'')
	b.WriteString(w.s)
	b.WriteByte('\'')
	return nil
}

// MapLine encodes one line of a HAProxy map file: "key value\n". Map files
// know no quoting: a key ends at the first space or tab, a line at CR or
// LF, a leading '#' makes a comment, and a line longer than the buffer is
// split. So both words must be printable ASCII without space, and the key
// must not start with '#'.
func MapLine(key, value Word) (string, error) {
	for _, w := range []Word{key, value} {
		if err := w.Err(); err != nil {
			return "", err
		}
		if err := quotable(w.s); err != nil {
			return "", err
		}
		if strings.ContainsAny(w.s, " \t") {
			return "", errors.New("encode: map word contains a space: " + Printable(w.s))
		}
	}
	if key.s[0] == '#' {
		return "", errors.New("encode: map key starts with '#': " + Printable(key.s))
	}
	if len(key.s)+len(value.s) > 8000 {
		return "", errors.New("encode: map line longer than 8000 bytes")
	}
	return key.s + " " + value.s + "\n", nil
}

var sniChars = charset("abcdefghijklmnopqrstuvwxyz0123456789.-*")

// CrtListDefaultLine encodes the crt-list line of a default certificate:
// "<cert file> !*\n". Listed first it is what HAProxy serves to a client
// whose SNI matches no line (or who sends none), and the negative filter
// of every name keeps its own names out of the SNI lookup, so a later
// line's certificate for a name it also covers still wins (measured with
// HAProxy 2.6: a tenant's *.example.com over a default for *.example.com).
func CrtListDefaultLine(cert Word) (string, error) {
	line, err := CrtListLine(cert)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(line, "\n") + " !*\n", nil
}

// CrtListLine encodes one crt-list line: "<cert file> [<sni filter>...]\n".
// The file must come from FilePath; filters must be host names (as
// validated by Host or WildcardHost): crt-list lines have their own
// syntax ('[' options, '!' negation, '#' comments) that none of these
// characters can trigger.
func CrtListLine(cert Word, filters ...Word) (string, error) {
	if err := cert.Err(); err != nil {
		return "", err
	}
	if cert.kind != kindFile {
		return "", errors.New("encode: crt-list certificate must be a FilePath")
	}
	line := cert.s
	for _, f := range filters {
		if err := f.Err(); err != nil {
			return "", err
		}
		for i := 0; i < len(f.s); i++ {
			if !sniChars[f.s[i]] {
				return "", errors.New("encode: SNI filter contains " + describeByte(f.s[i]) + ": " + Printable(f.s))
			}
		}
		if f.s == "" {
			return "", errors.New("encode: empty SNI filter")
		}
		line += " " + f.s
	}
	if len(filters)+1 > MaxLineArgs {
		return "", errors.New("encode: crt-list line has too many SNI filters")
	}
	return line + "\n", nil
}
