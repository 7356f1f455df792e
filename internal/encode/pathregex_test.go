package encode

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// acceptedPathRegexes are path regexes as people write them for
// ingress-nginx, with what HAProxy gets and the group count.
var acceptedPathRegexes = []struct {
	in, canon string
	groups    int
}{
	{`/api/v[0-9]+/(.*)`, `^/api/v[0-9]+/(.*)`, 1},
	{`/something(/|$)(.*)`, `^/something(/|$)(.*)`, 2},
	{`/(a|b)c`, `^/([ab])c`, 1},
	{`/(foo|bar)/x`, `^/(foo|bar)/x`, 1},
	{`/[^/]+/x`, `^/[^/]+/x`, 0},
	{`/\d{2,4}\.json`, `^/[0-9]{2,4}\.json`, 0},
	{`/\D`, `^/[^0-9]`, 0},
	{`/\w+`, `^/[0-9A-Z_a-z]+`, 0},
	{`/\W`, `^/[^0-9A-Z_a-z]`, 0},
	{`/docs(/.*)?`, `^/docs(/.*)?`, 1},
	{`/a.b`, `^/a.b`, 0},
	{`/x'y`, `^/x\x27y`, 0},
	{`/[a-z0-9_.-]+`, `^/[\-\.0-9_a-z]+`, 0},
	{`/(?:ab)*`, `^/(?:ab)*`, 0},
	{`/[[:alpha:]]`, `^/[A-Za-z]`, 0},
	{`/ab*?`, `^/ab*?`, 0},
	{`/[\]\-^]`, `^/[\-\]\^]`, 0},
	{`/%20x`, `^/\%20x`, 0},
	{`/(a*){3}`, `^/(a*){3}`, 1},
	{`/x{2}`, `^/x{2}`, 0},
	{`/x{2,}`, `^/x{2,}`, 0},
	{`/v1$`, `^/v1$`, 0},
	{`/(a|)`, `^/(a|(?:))`, 1},
	{`/(1)(2)(3)(4)(5)(6)(7)(8)(9)`, `^/(1)(2)(3)(4)(5)(6)(7)(8)(9)`, 9},
	{`/a+b+c+d+e+f+`, `^/a+b+c+d+e+f+`, 0},
	{`/[a|b]`, `^/[ab\|]`, 0},
	{`/[^!-~]`, `^/[^\!-~]`, 0},
	{`/(x|[ab])+`, `^/([abx])+`, 1},
	// At MaxPathRegexPaths, and common shapes under it.
	{`/(a?){10}a{10}`, `^/(a?){10}a{10}`, 1},
	{`/(\d{1,3}\.){3}\d{1,3}`, `^/([0-9]{1,3}\.){3}[0-9]{1,3}`, 1},
	{`/(en|fr){1,2}/x`, `^/(en|fr){1,2}/x`, 1},
}

// goExpr is an expression HAProxy gets without its match limit, which
// Go does not read.
func goExpr(s string) string {
	if !strings.HasPrefix(s, matchLimitPrefix) {
		panic("no match limit: " + s)
	}
	return strings.TrimPrefix(s, matchLimitPrefix)
}

func TestParsePathRegexAccepted(t *testing.T) {
	for _, tc := range acceptedPathRegexes {
		r, err := ParsePathRegex(tc.in)
		if err != nil {
			t.Errorf("%s: refused: %v", tc.in, err)
			continue
		}
		if r.String() != matchLimitPrefix+tc.canon || r.Groups() != tc.groups {
			t.Errorf("%s: got %s with %d groups, want %s with %d", tc.in, r.String(), r.Groups(), tc.canon, tc.groups)
		}
		checkSameMatches(t, tc.in, r)
	}
}

// checkSameMatches: Go reads the re-written expression as it reads the
// input anchored, on paths made of the input's own bytes.
func checkSameMatches(t testing.TB, in string, r PathRegex) {
	t.Helper()
	orig, err := regexp.Compile(`^(?:` + in + `)`)
	if err != nil {
		t.Fatalf("%s: accepted but Go does not compile it anchored: %v", in, err)
	}
	canon, err := regexp.Compile(goExpr(r.String()))
	if err != nil {
		t.Fatalf("%s: re-written %s does not compile: %v", in, r.String(), err)
	}
	if canon.NumSubexp() != r.Groups() || orig.NumSubexp() != r.Groups() {
		t.Fatalf("%s: groups %d, Go counts %d and %d", in, r.Groups(), orig.NumSubexp(), canon.NumSubexp())
	}
	for _, p := range samplePaths(in) {
		a, b := orig.FindStringSubmatch(p), canon.FindStringSubmatch(p)
		if strings.Join(a, "\x00") != strings.Join(b, "\x00") || (a == nil) != (b == nil) {
			t.Fatalf("%s on %q: input %q, re-written %s %q", in, p, a, r.String(), b)
		}
	}
}

// samplePaths are paths built from the regex's own bytes: prefixes of
// its literal reading, and a few fixed ones.
func samplePaths(in string) []string {
	lit := strings.NewReplacer(`\`, "", "(", "", ")", "", "[", "", "]", "", "*", "", "+", "", "?", "", "|", "", "^", "", "$", "").Replace(in)
	out := []string{"/", "/a", "/api/v1/users/42", "/something", "/something/new", "/somethingelse", "/docs", "/docs/x", "/x'y", "/12.json", "/ab", "/abbb", "/aab/c"}
	for i := 1; i <= len(lit); i++ {
		out = append(out, lit[:i], lit[:i]+"/x", lit[:i]+"9")
	}
	return out
}

func TestParsePathRegexRefused(t *testing.T) {
	for _, tc := range []struct{ in, rule string }{
		{"", "syntax"},
		{"api/(.*)", "syntax"},
		{"/" + strings.Repeat("a", MaxPathRegexBytes), "length"},
		{"/a b", "charset"},
		{"/a\x00", "charset"},
		{"/é", "charset"},
		{"/a|/b", "alternation"},
		{"/abc|/abd", "alternation"},
		{`/(?i)foo`, "group"},
		{`/(?P<n>x)`, "group"},
		{`/(?=x)`, "group"},
		{`/(?!x)`, "group"},
		{`/(?s).`, "group"},
		{`/(x)\1`, "escape"},
		{`/\bx`, "escape"},
		{`/\s`, "escape"},
		{`/\pL`, "escape"},
		{`/\x41`, "escape"},
		{`/\Qa\E`, "escape"},
		{`/a\`, "escape"},
		{`/a{,3}`, "repetition"},
		{`/(foo|bar)+`, "repetition"},
		{`/(a+)+`, "repetition"},
		{`/(a*)*`, "repetition"},
		{`/(a?)*`, "repetition"},
		{`/a{33}`, "repetition"},
		{`/(a*){7}`, "repetition"},
		{`/a*b*c*d*e*f*g*`, "repetition"},
		{`/(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)`, "groups"},
		{`/(`, "syntax"},
		{`/a**`, "syntax"},
		{`/[^\x00-\x{10FFFF}]`, "escape"},
		{`/[\d\D]`, "class"},
		{`/[ -~]`, "charset"},
		// The cost attacks: each passes the rules above, and PCRE2 tries
		// 2^32 ways on /aaa...a (33) and a tail before it fails.
		{`/(a?){32}a{32}`, "ways"},
		{`/` + strings.Repeat(`a?`, 32) + `a{32}`, "ways"},
		{`/(a|aa){11}`, "ways"},
		{`/(a?){11}`, "ways"},
		{`/((a?){4}){4}`, "ways"},
		{`/(a{0,2}){7}`, "ways"},
		{`/[0-9]{1,32}[0-9]{1,32}[0-9]{1,2}`, "ways"},
	} {
		_, err := ParsePathRegex(tc.in)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: accepted, or not an *Error: %v", tc.in, err)
			continue
		}
		if e.Rule != tc.rule {
			t.Errorf("%q: rule %s (%v), want %s", tc.in, e.Rule, err, tc.rule)
		}
	}
}

func TestRegexTarget(t *testing.T) {
	for _, tc := range []struct {
		in     string
		groups int
		want   string // "" for refused, then rule
		rule   string
	}{
		{"/$1", 1, `/\1`, ""},
		{"/v2/$2/x", 2, `/v2/\2/x`, ""},
		{"/$1$2", 2, `/\1\2`, ""},
		{"/$12", 1, `/\12`, ""}, // $1 then "2", as nginx and HAProxy both read it
		{"/$3", 2, "", "groups"},
		{"/$1", 0, "", "groups"},
		{"/$0", 1, "", "syntax"},
		{"/$", 1, "", "syntax"},
		{"/$x", 1, "", "syntax"},
		{"/plain", 1, "", "syntax"},
		{"$1", 1, "", "path"},
		{"/$1;evil", 1, "", "charset"},
		{"/$1%[src]", 1, "", "charset"},
		{"/$1?q=1", 1, "", "charset"},
		{`/\1$1`, 1, "", "charset"},
		{"/$1' evil", 1, "", "charset"},
		{"/a//$1", 1, "", "path"},
	} {
		w, err := RegexTarget(tc.in, tc.groups)
		if tc.want != "" {
			if err != nil || w.String() != tc.want {
				t.Errorf("%q: got %q, %v; want %q", tc.in, w.String(), err, tc.want)
			}
			continue
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%q: accepted as %q", tc.in, w.String())
			continue
		}
		if tc.rule != "path" && e.Rule != tc.rule {
			t.Errorf("%q: rule %s (%v), want %s", tc.in, e.Rule, err, tc.rule)
		}
	}
}

// FuzzPathRegex: any accepted regex compiles in Go, is read by Go as
// its input anchored, and renders as exactly one word of a config line.
func FuzzPathRegex(f *testing.F) {
	for _, tc := range acceptedPathRegexes {
		f.Add(tc.in)
	}
	for _, s := range []string{`/a|/b`, `/(?i)x`, `/\bx`, `/(a+)+`, `/x';evil`, "/x\n", `/[[:alpha:]`, `/[]a]`, `/[^]a]|x`, `/(|)`, `/\Q|\E`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParsePathRegex(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid path regex") {
				t.Fatalf("%q: unexpected error %v", s, err)
			}
			return
		}
		checkSameMatches(t, s, r)
		line, err := ConfigLine(Lit("acl"), Lit("r"), Lit("path"), Lit("-m"), Lit("reg"), r.Word())
		if err != nil {
			t.Fatalf("%q: config line: %v", s, err)
		}
		assertTokens(t, line, "acl", "r", "path", "-m", "reg", r.String())
		for _, host := range []string{"", "a.example", "*.foo.com"} {
			ml, err := MapLine(RegexRouteKey(host, r), ID("be_", "0123abcd"))
			if err != nil {
				t.Fatalf("%q: map line: %v", s, err)
			}
			key, val, ok := parseMapLine(ml)
			if !ok || key != RegexRouteKey(host, r).String() || val != "be_0123abcd" {
				t.Fatalf("%q: map line %s read back as %q %q %v", s, Printable(ml), key, val, ok)
			}
		}
	})
}

func TestRegexRouteKey(t *testing.T) {
	r, err := ParsePathRegex(`/api/v[0-9]+/(.*)`)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]string{"": `^/api/v[0-9]+/(.*)`, "a.example": `^a\.example/api/v[0-9]+/(.*)`,
		"*.foo.com": `^\*\.foo\.com/api/v[0-9]+/(.*)`} {
		if got := RegexRouteKey(host, r); got.Err() != nil || got.String() != matchLimitPrefix+want {
			t.Errorf("%q: %q (%v), want %q", host, got.String(), got.Err(), want)
		}
		// The key matches the host then the path, and nothing else.
		re := regexp.MustCompile(goExpr(RegexRouteKey(host, r).String()))
		h := host // the wildcard class keys by txn.pier_hwild, "*.foo.com" itself
		if !re.MatchString(h+"/api/v1/users") || re.MatchString(h+"/x/api/v1/") || (host != "" && re.MatchString("b.example/api/v1/")) {
			t.Errorf("%q: key %s matches otherwise", host, re)
		}
	}
	for _, host := range []string{"a b", "a/b", "A.example", "a.example;evil"} {
		if got := RegexRouteKey(host, r); got.Err() == nil {
			t.Errorf("host %q accepted: %q", host, got.String())
		}
	}
	if got := RegexRouteKey("a.example", PathRegex{}); got.Err() == nil {
		t.Errorf("zero PathRegex accepted: %q", got.String())
	}
}

// TestPathRegexHAProxy: HAProxy (PCRE2) compiles every accepted regex,
// as an ACL pattern and in replace-path with its target.
func TestPathRegexHAProxy(t *testing.T) {
	bin := haproxyBin(t)
	var c Config
	c.Section(Lit("defaults"))
	c.Line(Lit("mode"), Lit("http"))
	for _, k := range []keyword{"connect", "client", "server"} {
		c.Line(Lit("timeout"), Lit(k), Millis(5e9))
	}
	c.Section(Lit("frontend"), Lit("f"))
	c.Line(Lit("bind"), AddrPort(mustAddr("127.0.0.1"), 1))
	for i, tc := range acceptedPathRegexes {
		r, err := ParsePathRegex(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		c.Line(Lit("acl"), Concat(Lit("r"), Num(i)), Lit("path"), Lit("-m"), Lit("reg"), r.Word())
		if r.Groups() > 0 {
			target, err := RegexTarget("/x/$1", r.Groups())
			if err != nil {
				t.Fatal(err)
			}
			c.Line(Lit("http-request"), Lit("replace-path"), r.Word(), target, Lit("if"), Concat(Lit("r"), Num(i)))
		}
	}
	cfg, err := c.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "regex.cfg")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-c", "-dW", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("haproxy -c: %v\n%s\n%s", err, out, cfg)
	}
}

// TestParseValueRegex: the same subset, searched rather than anchored:
// no leading "/" needed, a top-level "|" allowed, no "^" added.
func TestParseValueRegex(t *testing.T) {
	for _, tc := range []struct{ in, canon string }{
		{`^(beta|alpha)$`, `^(beta|alpha)$`},
		{`v2|v3`, `v[23]`},
		{`user-[0-9]+`, `user\-[0-9]+`},
		{`.*`, `.*`},
	} {
		r, err := ParseValueRegex(tc.in)
		if err != nil || r.String() != matchLimitPrefix+tc.canon {
			t.Errorf("%s: got %s, %v; want %s", tc.in, r.String(), err, tc.canon)
		}
	}
	for _, in := range []string{"", "a b", `(?i)beta`, `(a+)+`, `\bx`, "x'\n", `(a?){32}a{32}`, strings.Repeat(`a?`, 32) + `a{32}`} {
		if r, err := ParseValueRegex(in); err == nil {
			t.Errorf("%q accepted as %s", in, r.String())
		}
	}
}

// FuzzValueRegex: any accepted value regex compiles in Go, finds what
// its input finds, and renders as one word.
func FuzzValueRegex(f *testing.F) {
	for _, tc := range acceptedPathRegexes {
		f.Add(tc.in)
	}
	for _, s := range []string{`^(beta|alpha)$`, `v2|v3`, `a|`, `|`, `x';evil`, `%[src]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseValueRegex(s)
		if err != nil {
			return
		}
		orig, err := regexp.Compile(s)
		if err != nil {
			t.Fatalf("%q: accepted but Go does not compile it: %v", s, err)
		}
		canon, err := regexp.Compile(goExpr(r.String()))
		if err != nil {
			t.Fatalf("%q: re-written %s does not compile: %v", s, r.String(), err)
		}
		for _, v := range samplePaths(s) {
			if orig.MatchString(v) != canon.MatchString(v) || orig.NumSubexp() != canon.NumSubexp() {
				t.Fatalf("%q on %q: re-written %s reads otherwise", s, v, r.String())
			}
		}
		line, err := ConfigLine(Lit("acl"), Lit("r"), Lit("req.hdr(x)"), Lit("-m"), Lit("reg"), r.Word())
		if err != nil {
			t.Fatalf("%q: config line: %v", s, err)
		}
		assertTokens(t, line, "acl", "r", "req.hdr(x)", "-m", "reg", r.String())
	})
}
