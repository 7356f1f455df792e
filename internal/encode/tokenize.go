package encode

import (
	"errors"
	"strings"
)

// Tokens is what HAProxy 2.6 makes of one configuration line: the words,
// and the interpretations that happened on the way. An emitted line is
// sound when it has exactly the intended words and none of the flags.
type Tokens struct {
	Words     []string
	Comment   bool // an unquoted '#' ended the line
	Env       bool // a $VAR was expanded (inside double quotes)
	Escape    bool // a backslash escape was interpreted
	Truncated bool // a CR or LF ended the line before its end
	Scope     bool // a "[scope]" line, not parsed into words
}

// Errors that make HAProxy refuse the line.
var (
	ErrStrayNUL    = errors.New("stray NUL character")
	ErrQuote       = errors.New("unmatched quote")
	ErrHex         = errors.New("truncated or invalid hexadecimal sequence")
	ErrVarName     = errors.New("forbidden first char in environment variable name")
	ErrBrace       = errors.New("unmatched brace in environment variable name")
	ErrWordExpand  = errors.New("truncated or invalid word expansion sequence")
	ErrTooManyArgs = errors.New("too many words")
)

// Tokenize models how HAProxy 2.6 reads one line of a configuration file:
// readcfgfile (src/cfgparse.c) strips the LF, refuses NUL and skips
// leading spaces, then parse_line (src/tools.c) splits words with the
// options PARSE_OPT_ENV|DQUOTE|SQUOTE|BKSLASH|SHARP|WORD_EXPAND:
//
//   - unquoted spaces separate words; an empty word at the very end is
//     dropped, an empty quoted one in the middle is kept;
//   - '#' outside quotes starts a comment; CR or LF ends the line;
//   - '...' protects everything, with no escape inside;
//   - "..." protects spaces, '#' and "'", and expands $VAR, ${VAR},
//     ${VAR-default}, ${VAR[*]} (split into words) and $.LINE-style
//     pseudo-variables; '$' outside double quotes is a plain character;
//   - outside single quotes, '\' escapes space, '\', '#', the quotes,
//     '$' (in double quotes only), t, n, r and xNN; before anything
//     else it is kept as a plain backslash. There is no line
//     continuation: a trailing backslash is a plain character.
//
// getenv resolves variables, including the pseudo-variables ".LINE",
// ".FILE" and ".SECTION" (report !ok to model an unknown one).
func Tokenize(line string, getenv func(name string) (string, bool)) (Tokens, error) {
	var t Tokens
	if strings.IndexByte(line, 0) >= 0 {
		return t, ErrStrayNUL
	}
	line = strings.TrimLeft(line, " \t\n\v\f\r")
	if strings.HasPrefix(line, "[") {
		t.Scope = true
		return t, nil
	}
	p := &lineParser{in: line, getenv: getenv, t: &t}
	err := p.run()
	return t, err
}

type lineParser struct {
	in     string
	i      int
	cur    []byte
	args   int // index of the word being built, as parse_line's arg
	squote bool
	dquote bool
	getenv func(string) (string, bool)
	t      *Tokens
}

func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func (p *lineParser) peek(off int) byte {
	if p.i+off < len(p.in) {
		return p.in[p.i+off]
	}
	return 0
}

// separate ends the current word, as parse_line does on an unquoted space
// or an expanded space: HAProxy fails once a 65th word is started.
func (p *lineParser) separate() error {
	p.t.Words = append(p.t.Words, string(p.cur))
	p.cur = p.cur[:0]
	p.args++
	if p.args >= MaxLineArgs {
		return ErrTooManyArgs
	}
	return nil
}

func (p *lineParser) run() error {
	for p.i < len(p.in) {
		c := p.in[p.i]
		switch {
		case c == '\n' || c == '\r':
			p.t.Truncated = true
			return p.finish()
		case c == '#' && !p.squote && !p.dquote:
			p.t.Comment = true
			return p.finish()
		case c == '"' && !p.squote:
			p.dquote = !p.dquote
			p.i++
		case c == '\'' && !p.dquote:
			p.squote = !p.squote
			p.i++
		case c == '\\' && !p.squote:
			if err := p.escape(); err != nil {
				return err
			}
		case isSpace(c) && !p.squote && !p.dquote:
			for p.i < len(p.in) && isSpace(p.in[p.i]) {
				p.i++
			}
			if err := p.separate(); err != nil {
				return err
			}
		case c == '$' && p.dquote:
			if err := p.expand(); err != nil {
				return err
			}
		default:
			p.cur = append(p.cur, c)
			p.i++
		}
	}
	return p.finish()
}

func (p *lineParser) finish() error {
	if len(p.cur) > 0 {
		p.t.Words = append(p.t.Words, string(p.cur))
	}
	if p.squote || p.dquote {
		return ErrQuote
	}
	return nil
}

func (p *lineParser) escape() error {
	send := byte('\\')
	adv := 1
	switch n := p.peek(1); {
	case n == ' ' || n == '\\':
		send, adv = n, 2
	case n == 't':
		send, adv = '\t', 2
	case n == 'n':
		send, adv = '\n', 2
	case n == 'r':
		send, adv = '\r', 2
	case n == '#' || n == '\'' || n == '"':
		send, adv = n, 2
	case n == '$' && p.dquote:
		send, adv = n, 2
	case n == 'x':
		if !isHex(p.peek(2)) || !isHex(p.peek(3)) {
			return ErrHex
		}
		send, adv = unhex(p.peek(2))<<4|unhex(p.peek(3)), 4
	}
	if adv > 1 {
		p.t.Escape = true
	}
	p.cur = append(p.cur, send)
	p.i += adv
	return nil
}

func isAlpha(c byte) bool { return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }

func (p *lineParser) expand() error {
	p.t.Env = true
	p.i++ // '$'
	brace := p.peek(0) == '{'
	if brace {
		p.i++
	}
	if c := p.peek(0); !isAlpha(c) && c != '_' && c != '.' {
		return ErrVarName
	}
	start := p.i
	if p.peek(0) == '.' {
		p.i++
	}
	for c := p.peek(0); isAlpha(c) || ('0' <= c && c <= '9') || c == '_'; c = p.peek(0) {
		p.i++
	}
	name := p.in[start:p.i]
	value, ok := p.getenv(name)
	if !ok && name[0] == '.' {
		return ErrVarName
	}
	split := false
	if brace && p.peek(0) == '[' {
		if p.peek(1) != '*' || p.peek(2) != ']' {
			return ErrWordExpand
		}
		split = true
		p.i += 3
	}
	if brace {
		if p.peek(0) == '-' {
			end := strings.IndexByte(p.in[p.i:], '}')
			if end < 0 {
				return ErrBrace
			}
			if !ok {
				value, ok = p.in[p.i+1:p.i+end], true
			}
			p.i += end
		} else if p.peek(0) != '}' {
			return ErrBrace
		}
		p.i++ // '}'
	}
	return p.emitValue(value, split)
}

func (p *lineParser) emitValue(v string, split bool) error {
	for j := 0; j < len(v); j++ {
		if !split || !isSpace(v[j]) {
			p.cur = append(p.cur, v[j])
			continue
		}
		if err := p.separate(); err != nil {
			return err
		}
		for j+1 < len(v) && isSpace(v[j+1]) {
			j++
		}
	}
	return nil
}
