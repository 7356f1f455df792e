package encode

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"regexp/syntax"
)

// Limits of a path regular expression (ingress-nginx use-regex paths).
const (
	// MaxPathRegexBytes bounds the expression as written.
	MaxPathRegexBytes = 256
	// MaxPathRegexGroups bounds its capture groups: rewrite-target
	// names them $1 to $9.
	MaxPathRegexGroups = 9
	// MaxPathRegexRepeat bounds a counted repetition {m,n}.
	MaxPathRegexRepeat = 32
	// MaxPathRegexUnbounded bounds the unbounded repetitions (*, + and
	// {m,}), a counted one's content counting n times: HAProxy's PCRE2
	// backtracks, and k overlapping unbounded repetitions can cost n^k
	// steps on a path of n bytes before they fail.
	MaxPathRegexUnbounded = 6
	// MaxPathRegexPaths bounds the ways the bounded part of an
	// expression can match one text (pathsOf): PCRE2 backtracks, and
	// (a?){32}a{32} passes every rule above yet tries 2^32 ways before
	// it fails.
	MaxPathRegexPaths = 1024
	// MatchLimit is the PCRE2 match limit every expression HAProxy gets
	// starts with ((*LIMIT_MATCH=N), matchLimitPrefix): what the rules
	// above cannot bound (k unbounded repetitions cost up to n^k on n
	// bytes) stops there, the expression then not matching. 20,000
	// steps are about 25 µs of a HAProxy thread (HAProxy 2.6, PCRE2
	// JIT, measured), and more than a linear expression needs on a
	// 16 KiB path.
	MatchLimit = 20000
)

// matchLimitPrefix starts every expression HAProxy gets: PCRE2 reads it
// only at the very start of a pattern, before any "^".
var matchLimitPrefix = "(*LIMIT_MATCH=" + itoa(MatchLimit) + ")"

// PathRegex is a validated regular expression (a path's, or a header
// value's): the subset that Go's RE2 (this validator) and HAProxy's
// PCRE2 (the matcher) read alike.
type PathRegex struct {
	source string // as written
	canon  string // ^ + the expression re-written from Go's parse tree
	groups int
}

// Groups is the number of capture groups.
func (r PathRegex) Groups() int { return r.groups }

// String is the expression HAProxy gets: the match limit, then the
// re-written expression (anchored for a path).
func (r PathRegex) String() string { return matchLimitPrefix + r.canon }

// Word is that expression, single-quoted (the config parser
// interprets nothing between single quotes, and it holds none).
func (r PathRegex) Word() Word {
	if r.canon == "" {
		return Word{err: refuse("path regex", "syntax", "", "zero PathRegex")}
	}
	return Word{s: r.String(), kind: kindUser, quote: true}
}

// ParsePathRegex validates s, an Ingress path read as a regular
// expression anchored at its start (ingress-nginx: location ~* "^<s>").
// It is parsed by Go's regexp/syntax, and every node of the tree must be
// one of: a literal of printable ASCII, ".", a class of printable ASCII
// (or the negation of one), a capture group (unnamed), alternation
// (not at the top: ingress-nginx anchors only its first branch),
// concatenation, the repetitions * + ? {m,n} (greedy or lazy; n at most
// MaxPathRegexRepeat; an unbounded one holding neither a repetition nor
// an alternation, so PCRE2 cannot backtrack exponentially), ^ and $.
// Before parsing, the text is held to what both engines read alike: a
// backslash only before punctuation or d, D, w, W; "(?" only as "(?:"
// (no flags, named groups or lookarounds, which RE2 also refuses); no
// "{," (a count PCRE2 10.43 reads and older versions take literally).
//
// The expression HAProxy gets is re-written from the parse tree (each
// class as explicit ranges, each literal punctuation escaped), not the
// text: what HAProxy matches is what Go checked.
func ParsePathRegex(s string) (PathRegex, error) {
	return parseRegex("path regex", s, true)
}

// ParseValueRegex validates s, a regular expression searched for
// anywhere in a header value (ingress-nginx's canary-by-header-pattern,
// ngx.re.match without anchor): the subset of ParsePathRegex, except
// that it need not start with "/", a top-level "|" is allowed (a search
// reads it alike in both engines) and nothing is anchored for it.
func ParseValueRegex(s string) (PathRegex, error) {
	return parseRegex("value regex", s, false)
}

func parseRegex(k, s string, path bool) (PathRegex, error) {
	if len(s) > MaxPathRegexBytes {
		return PathRegex{}, refuse(k, "length", s, "longer than "+itoa(MaxPathRegexBytes)+" bytes")
	}
	if path && !strings.HasPrefix(s, "/") {
		return PathRegex{}, refuse(k, "syntax", s, `must start with "/"`)
	}
	if s == "" {
		return PathRegex{}, refuse(k, "syntax", s, "must not be empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return PathRegex{}, refuse(k, "charset", s, "contains "+describeByte(s[i])+"; only printable ASCII without spaces")
		}
	}
	if err := regexText(k, s, path); err != nil {
		return PathRegex{}, err
	}
	re, err := syntax.Parse(s, syntax.Perl)
	if err != nil {
		return PathRegex{}, refuse(k, "syntax", s, "not a regular expression: "+err.Error())
	}
	w := &regexWriter{kind: k, src: s}
	if path {
		w.b.WriteByte('^')
	}
	// Anchored, a top-level alternation would anchor only its first
	// branch: grouped (the text check refuses one, this keeps it so).
	if err := w.operand(re, path && re.Op == syntax.OpAlternate, false); err != nil {
		return PathRegex{}, err
	}
	if w.unbounded > MaxPathRegexUnbounded {
		return PathRegex{}, refuse(k, "repetition", s, "more than "+itoa(MaxPathRegexUnbounded)+" unbounded repetitions (*, +, {m,})")
	}
	if n := pathsOf(re); n > MaxPathRegexPaths {
		return PathRegex{}, refuse(k, "ways", s, "can match one text in more than "+itoa(MaxPathRegexPaths)+
			" ways (each ?, | and {m,n} multiplies them; a count of a group holding ?, | or a count multiplies most): PCRE2 would try each")
	}
	if w.groups > MaxPathRegexGroups {
		return PathRegex{}, refuse(k, "groups", s, "more than "+itoa(MaxPathRegexGroups)+" capture groups")
	}
	return PathRegex{source: s, canon: w.b.String(), groups: w.groups}, nil
}

// regexText refuses what the parse tree no longer shows and PCRE2
// could read otherwise: escapes other than punctuation and \d \D \w \W
// (\s, \b, \p{..}, \x.., octal, \Q..\E), groups other than "(?:", and
// "{," counts.
func regexText(k, s string, path bool) error {
	depth, class := 0, -1 // class: where the open class's items start, or -1
	for i := 0; i < len(s); i++ {
		switch {
		case class >= 0 && strings.HasPrefix(s[i:], "[:"):
			if end := strings.Index(s[i+2:], ":]"); end >= 0 {
				i += end + 3 // a POSIX class inside a class: its "]" does not close
			}
		case class >= 0 && s[i] == ']' && i > class:
			class = -1
		case class < 0 && s[i] == '[':
			class = i + 1
			if strings.HasPrefix(s[i+1:], "^") {
				class++
			}
		case class < 0 && s[i] == '(':
			depth++
		case class < 0 && s[i] == ')':
			depth--
		case class < 0 && s[i] == '|' && depth == 0 && path:
			// Go factors "/a|/b" into "/[ab]", so the tree no longer shows it.
			return refuse(k, "alternation", s, "| at the top level: ingress-nginx anchors only its first branch; group the branches, (/a|/b)")
		}
		switch {
		case s[i] == '\\':
			if i+1 == len(s) {
				return refuse(k, "escape", s, "ends with a backslash")
			}
			c := s[i+1]
			if !isPunct(c) && !strings.ContainsRune("dDwW", rune(c)) {
				return refuse(k, "escape", s, `\`+string(c)+` is not accepted: only \ before punctuation, \d, \D, \w and \W`)
			}
			i++
		case strings.HasPrefix(s[i:], "(?") && !strings.HasPrefix(s[i:], "(?:"):
			return refuse(k, "group", s, "(? other than (?: : no flags, named groups or lookarounds")
		case strings.HasPrefix(s[i:], "{,"):
			return refuse(k, "repetition", s, "{,n} is read differently by PCRE2 versions: write {0,n}")
		}
	}
	return nil
}

func isPunct(c byte) bool {
	return c > ' ' && c < 0x7f && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && !('0' <= c && c <= '9')
}

// regexWriter re-writes a parse tree in the syntax both engines share.
type regexWriter struct {
	kind, src string
	b         strings.Builder
	groups    int
	unbounded int
	weight    int // how many times the current node repeats (counted repetitions)
}

func (w *regexWriter) refuse(rule, msg string) error { return refuse(w.kind, rule, w.src, msg) }

// node writes re. repeated says it is inside an unbounded repetition,
// which may hold neither a repetition nor an alternation.
func (w *regexWriter) node(re *syntax.Regexp, repeated bool) error {
	if re.Flags&syntax.FoldCase != 0 {
		return w.refuse("flags", "case folding is not accepted")
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		w.b.WriteString("(?:)")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if err := w.literal(r, false); err != nil {
				return err
			}
		}
	case syntax.OpCharClass:
		return w.class(re.Rune)
	case syntax.OpAnyCharNotNL:
		w.b.WriteByte('.')
	case syntax.OpBeginText:
		w.b.WriteByte('^')
	case syntax.OpEndText:
		w.b.WriteByte('$')
	case syntax.OpCapture:
		if re.Name != "" {
			return w.refuse("group", "named groups are not accepted")
		}
		w.groups++
		w.b.WriteByte('(')
		if err := w.node(re.Sub[0], repeated); err != nil {
			return err
		}
		w.b.WriteByte(')')
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			if err := w.operand(sub, sub.Op == syntax.OpAlternate, repeated); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		if repeated {
			return w.refuse("repetition", "an alternation inside *, + or {m,} can backtrack exponentially in HAProxy's PCRE2")
		}
		for i, sub := range re.Sub {
			if i > 0 {
				w.b.WriteByte('|')
			}
			if err := w.node(sub, repeated); err != nil {
				return err
			}
		}
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		return w.repeat(re, repeated)
	default:
		return w.refuse("syntax", "not accepted: "+opName(re.Op))
	}
	return nil
}

// operand writes sub inside a concatenation or a repetition, in a
// non-capturing group when it would otherwise bind otherwise.
func (w *regexWriter) operand(sub *syntax.Regexp, group, repeated bool) error {
	if group {
		w.b.WriteString("(?:")
	}
	if err := w.node(sub, repeated); err != nil {
		return err
	}
	if group {
		w.b.WriteByte(')')
	}
	return nil
}

func (w *regexWriter) repeat(re *syntax.Regexp, repeated bool) error {
	min, max := re.Min, re.Max
	switch re.Op {
	case syntax.OpStar:
		min, max = 0, -1
	case syntax.OpPlus:
		min, max = 1, -1
	case syntax.OpQuest:
		min, max = 0, 1
	}
	if repeated {
		return w.refuse("repetition", "a repetition inside *, + or {m,} can backtrack exponentially in HAProxy's PCRE2")
	}
	if max > MaxPathRegexRepeat || min > MaxPathRegexRepeat {
		return w.refuse("repetition", "a count over "+itoa(MaxPathRegexRepeat))
	}
	sub := re.Sub[0]
	group := sub.Op == syntax.OpConcat || sub.Op == syntax.OpAlternate || sub.Op == syntax.OpEmptyMatch ||
		(sub.Op == syntax.OpLiteral && len(sub.Rune) > 1) || isRepeat(sub.Op) || sub.Op == syntax.OpBeginText || sub.Op == syntax.OpEndText
	saved := w.weight
	if max == -1 {
		w.unbounded += max1(w.weight)
	} else {
		w.weight = max1(w.weight) * max
	}
	if err := w.operand(sub, group, max == -1); err != nil {
		return err
	}
	w.weight = saved
	switch {
	case re.Op == syntax.OpStar:
		w.b.WriteByte('*')
	case re.Op == syntax.OpPlus:
		w.b.WriteByte('+')
	case re.Op == syntax.OpQuest:
		w.b.WriteByte('?')
	case max == -1:
		w.b.WriteString("{" + itoa(min) + ",}")
	case min == max:
		w.b.WriteString("{" + itoa(min) + "}")
	default:
		w.b.WriteString("{" + itoa(min) + "," + itoa(max) + "}")
	}
	if re.Flags&syntax.NonGreedy != 0 {
		w.b.WriteByte('?')
	}
	return nil
}

func max1(n int) int { return max(n, 1) }

// pathsOf bounds the ways the bounded part of re can match one text, the
// paths a backtracking matcher may try from one start before it fails:
// a concatenation multiplies its parts', an alternation adds its
// branches', ? adds the empty way, {m,n} adds sub^k for k from m to n.
// It bounds the product of the counts rather than refusing a count of
// a group holding ?, | or a count: (en|fr){1,2} and (\d{1,3}\.){3}
// (81 ways) are common and cheap. An unbounded repetition counts 1: its
// cost, up to n on n bytes, is what MaxPathRegexUnbounded bounds (it
// holds no choice of its own), and MatchLimit stops the rest. The count
// saturates just above MaxPathRegexPaths.
func pathsOf(re *syntax.Regexp) int {
	const top = MaxPathRegexPaths + 1
	mul := func(a, b int) int { return min(a*b, top) } // a, b ≤ top: no overflow
	switch re.Op {
	case syntax.OpCapture:
		return pathsOf(re.Sub[0])
	case syntax.OpConcat:
		n := 1
		for _, sub := range re.Sub {
			n = mul(n, pathsOf(sub))
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for _, sub := range re.Sub {
			n = min(n+pathsOf(sub), top)
		}
		return n
	case syntax.OpQuest:
		return min(pathsOf(re.Sub[0])+1, top)
	case syntax.OpRepeat:
		if re.Max == -1 {
			return 1
		}
		sub, n, pow := pathsOf(re.Sub[0]), 0, 1
		for k := 0; k <= re.Max; k++ {
			if k >= re.Min {
				n = min(n+pow, top)
			}
			pow = mul(pow, sub)
		}
		return n
	}
	return 1
}

func isRepeat(op syntax.Op) bool {
	return op == syntax.OpStar || op == syntax.OpPlus || op == syntax.OpQuest || op == syntax.OpRepeat
}

// literal writes one rune: letters, digits and "/_~" as they are, other
// printable ASCII escaped with a backslash (a literal in both engines,
// in a class too), "'" as \x27 (it would end the single-quoted word).
func (w *regexWriter) literal(r rune, inClass bool) error {
	switch {
	case r == '\'':
		w.b.WriteString(`\x27`)
	case r < 0x80 && (isAlnum(byte(r)) || strings.ContainsRune("/_~", r)):
		w.b.WriteRune(r)
	case r < 0x7f && isPunct(byte(r)):
		w.b.WriteByte('\\')
		w.b.WriteRune(r)
	default:
		what := "character " + strconv.QuoteRuneToASCII(r)
		if inClass {
			what = "a class holding " + strconv.QuoteRuneToASCII(r)
		}
		return w.refuse("charset", what+": only printable ASCII (paths are percent-encoded)")
	}
	return nil
}

func isAlnum(c byte) bool { return isAlpha(c) || ('0' <= c && c <= '9') }

// class writes a character class from Go's sorted ranges. A class
// reaching utf8.MaxRune is a negated one ([^/], \D) and is written
// negated; either way every bound must be printable ASCII.
func (w *regexWriter) class(ranges []rune) error {
	negated := len(ranges) > 0 && ranges[len(ranges)-1] == utf8.MaxRune
	if negated {
		ranges = complement(ranges)
	}
	if len(ranges) == 0 {
		return w.refuse("class", "a class that matches nothing, or everything")
	}
	w.b.WriteByte('[')
	if negated {
		w.b.WriteByte('^')
	}
	for i := 0; i < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if err := w.literal(lo, true); err != nil {
			return err
		}
		if hi == lo {
			continue
		}
		if hi > lo+1 {
			w.b.WriteByte('-')
		}
		if err := w.literal(hi, true); err != nil {
			return err
		}
	}
	w.b.WriteByte(']')
	return nil
}

// complement is the set of runes not in sorted ranges (lo, hi pairs).
func complement(ranges []rune) []rune {
	var out []rune
	next := rune(0)
	for i := 0; i < len(ranges); i += 2 {
		if ranges[i] > next {
			out = append(out, next, ranges[i]-1)
		}
		next = ranges[i+1] + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, next, utf8.MaxRune)
	}
	return out
}

func opName(op syntax.Op) string {
	switch op {
	case syntax.OpNoMatch:
		return "an expression that matches nothing"
	case syntax.OpAnyChar:
		return "(?s) or a dot that matches newlines"
	case syntax.OpBeginLine, syntax.OpEndLine:
		return "multi-line anchors"
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return `word boundaries (\b, \B)`
	}
	return "operator " + op.String()
}
