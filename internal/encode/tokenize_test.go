package encode

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func testEnv(name string) (string, bool) {
	switch name {
	case "V":
		return "p q", true
	case ".LINE":
		return "7", true
	}
	return "", false
}

// Expectations observed with haproxy 2.6.12 (`.notice <args>` echoes the
// first argument), and in src/tools.c parse_line.
func TestTokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
		err  error
		flag string
	}{
		{in: `a b  c`, want: []string{"a", "b", "c"}},
		{in: "  \t lead", want: []string{"lead"}},
		{in: `a "b c" 'd e'`, want: []string{"a", "b c", "d e"}},
		{in: `'x$HOME'`, want: []string{"x$HOME"}},
		{in: `$HOME`, want: []string{"$HOME"}},
		{in: `"$V"`, want: []string{"p q"}, flag: "env"},
		{in: `"${V[*]}"`, want: []string{"p", "q"}, flag: "env"},
		{in: `"${NOPE-def}x"`, want: []string{"defx"}, flag: "env"},
		{in: `"${V-def}"`, want: []string{"p q"}, flag: "env"},
		{in: `"$NOPE"`, want: nil, flag: "env"},
		{in: `"${.LINE}"`, want: []string{"7"}, flag: "env"},
		{in: `"$.FILE"`, err: ErrVarName},
		{in: `"$9"`, err: ErrVarName},
		{in: `"${V"`, err: ErrBrace},
		{in: `"${V[x]}"`, err: ErrWordExpand},
		{in: `a\x41b`, want: []string{"aAb"}, flag: "escape"},
		{in: `a\xZZ`, err: ErrHex},
		{in: `end\`, want: []string{`end\`}},
		{in: `a\qb`, want: []string{`a\qb`}},
		{in: `"\$x"`, want: []string{"$x"}, flag: "escape"},
		{in: `\$x`, want: []string{`\$x`}},
		{in: `'a\'b`, want: []string{`a\b`}},
		{in: `"a'b"`, want: []string{"a'b"}},
		{in: `\'x`, want: []string{"'x"}, flag: "escape"},
		{in: `a\ b`, want: []string{"a b"}, flag: "escape"},
		{in: `x\"y`, want: []string{`x"y`}, flag: "escape"},
		{in: `a#b`, want: []string{"a"}, flag: "comment"},
		{in: `a \#b`, want: []string{"a", "#b"}, flag: "escape"},
		{in: `"a#b" 'c#d'`, want: []string{"a#b", "c#d"}},
		{in: "tr\rail x", want: []string{"tr"}, flag: "truncated"},
		{in: "a \r b", want: []string{"a", "b"}}, // skipped as a space run
		{in: "a\x0bb", want: []string{"a", "b"}},
		{in: "a\x01b", want: []string{"a\x01b"}},
		{in: `a '' b`, want: []string{"a", "", "b"}},
		{in: `a ''`, want: []string{"a"}},
		{in: `a"b c"d`, want: []string{"ab cd"}},
		{in: `'unterminated`, err: ErrQuote},
		{in: `"unterminated`, err: ErrQuote},
		{in: "a\x00b", err: ErrStrayNUL},
		{in: "[scope]", flag: "scope"},
		{in: strings.TrimSpace(strings.Repeat("w ", 64)), want: slices.Repeat([]string{"w"}, 64)},
		{in: strings.Repeat("w ", 64), err: ErrTooManyArgs},
		{in: strings.Repeat("w ", 65), err: ErrTooManyArgs},
	} {
		got, err := Tokenize(tc.in, testEnv)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err %v, want %v", Printable(tc.in), err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if !slices.Equal(got.Words, tc.want) {
			t.Errorf("%s: words %q, want %q", Printable(tc.in), got.Words, tc.want)
		}
		flags := map[string]bool{"env": got.Env, "escape": got.Escape, "comment": got.Comment, "truncated": got.Truncated, "scope": got.Scope}
		for name, set := range flags {
			if set != (name == tc.flag) {
				t.Errorf("%s: flag %s=%v", Printable(tc.in), name, set)
			}
		}
	}
}

func TestEmitters(t *testing.T) {
	user, _ := Path("/a b", PathExact) // refused: zero Value
	if _, err := ConfigLine(Lit("x"), user.Word()); err == nil {
		t.Errorf("zero Value emitted")
	}
	if _, err := ConfigLine(Lit("x"), Word{}); err == nil {
		t.Errorf("zero Word emitted")
	}
	if _, err := ConfigLine(Lit("x"), Word{s: "a'b", kind: kindUser, quote: true}); err == nil {
		t.Errorf("quote inside a user word emitted")
	}
	if _, err := ConfigLine(Lit("x"), Word{s: "a b", kind: kindIdent}); err == nil {
		t.Errorf("unquoted space emitted")
	}
	if l, err := ConfigLine(Lit("string"), Lit("not found")); err != nil || l != "string 'not found'" {
		t.Errorf("Lit with space: %q %v", l, err)
	}
	if Lit("a'b").Err() == nil || Lit("a\nb").Err() == nil {
		t.Errorf("Lit accepted a quote or LF")
	}
	if _, err := ConfigLine(slices.Repeat([]Word{Lit("w")}, 65)...); err == nil {
		t.Errorf("65 words emitted")
	}
	host, _ := Host("example.com")
	if Concat(ID("be_", "abc"), host.Word()).Err() == nil {
		t.Errorf("Concat took a user value")
	}
	for _, id := range []string{"", "-a", "A", "a_b", "a b", "a/b", strings.Repeat("a", 65)} {
		if ID("p_", id).Err() == nil {
			t.Errorf("ID(%q) accepted", id)
		}
	}
	for _, p := range []string{"rel/x", "/a/../b", "/a/", "/a b", "/a'b", "/a:b"} {
		if FilePath(p).Err() == nil {
			t.Errorf("FilePath(%q) accepted", p)
		}
	}
	if _, err := CrtListLine(Lit("/x.pem")); err == nil {
		t.Errorf("crt-list took a literal as certificate")
	}
	if _, err := CrtListLine(FilePath("/x.pem"), Lit("!neg")); err == nil {
		t.Errorf("crt-list took a negated filter")
	}
	if _, err := MapLine(Lit("#k"), Lit("v")); err == nil {
		t.Errorf("map key with # accepted")
	}
	if _, err := SetServerState(ID("be_", "a"), ID("s", "1"), "up;shutdown"); err == nil {
		t.Errorf("unknown state accepted")
	}
	c, err := SetServerWeight(ID("be_", "a"), ID("s", "3"), 7)
	if err != nil || c.String() != "set server be_a/s3 weight 7" {
		t.Errorf("weight: %q %v", c, err)
	}
	if Account("haproxy").Err() != nil || Account("Root").Err() == nil {
		t.Errorf("Account")
	}
	if Millis(1500e6).String() != "1500ms" || Millis(60e9).String() != "1m" || Millis(0).String() != "0s" || Millis(90e9).String() != "90s" {
		t.Errorf("Millis")
	}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
