package encode

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func ruleOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Rule
	}
	if err != nil {
		return "?"
	}
	return ""
}

func TestHost(t *testing.T) {
	for _, tc := range []struct{ in, rule string }{
		{"example.com", ""},
		{"my-host", ""},
		{"exact-path-rules", ""},
		{"xn--bcher-kva.example", ""},
		{strings.Repeat("a", 63) + ".com", ""},
		{strings.Repeat("a", 64) + ".com", "label-length"},
		{"", "empty"},
		{"Example.com", "lowercase"},
		{"example.com:80", "port"},
		{"10.0.0.1", "ip"},
		{"[::1]", "ip"},
		{"::1", "ip"},
		{"*.example.com", "wildcard"},
		{"a..b", "dns1123"},
		{"-a.b", "dns1123"},
		{"a_b.c", "dns1123"},
		{"bücher.example", "ascii"},
		{"a\x00b", "control"},
		{"\xff", "utf8"},
	} {
		_, err := Host(tc.in)
		if got := ruleOf(err); got != tc.rule {
			t.Errorf("Host(%s): rule %q, want %q (%v)", Printable(tc.in), got, tc.rule, err)
		}
	}
}

func TestHostMessageSaysNoLowercasing(t *testing.T) {
	_, err := Host("A.EXAMPLE")
	if err == nil || !strings.Contains(err.Error(), "lowercas") {
		t.Fatalf("got %v", err)
	}
}

func TestWildcardHost(t *testing.T) {
	for _, tc := range []struct{ in, rule string }{
		{"*.foo.com", ""},
		{"*.com", ""},
		{"*", "wildcard"},
		{"*.", "empty"},
		{"*.*.x", "wildcard"},
		{"foo.com", "wildcard"},
		{"a.*.com", "wildcard"},
		{"*.Foo.com", "lowercase"},
		{"*.10.0.0.1", "ip"},
	} {
		_, err := WildcardHost(tc.in)
		if got := ruleOf(err); got != tc.rule {
			t.Errorf("WildcardHost(%s): rule %q, want %q (%v)", Printable(tc.in), got, tc.rule, err)
		}
	}
}

func TestPath(t *testing.T) {
	for _, tc := range []struct{ in, rule string }{
		{"/", ""},
		{"/foo", ""},
		{"/foo/", ""},
		{"/a%20b", ""},
		{"/a;b=c,d", ""},
		{"/@:~!$&()*+=", ""},
		{"foo", "absolute"},
		{"", "empty"},
		{"/a//b", "sequence"},
		{"/a/./b", "sequence"},
		{"/a/../b", "sequence"},
		{"/a/.", "sequence"},
		{"/a/..", "sequence"},
		{"/a%2fb", "percent-slash"},
		{"/a%5Cb", "percent-slash"},
		{"/a%2e", "percent-dot"},
		{"/a%00", "percent-nul"},
		{"/a%0d", "percent-control"},
		{"/a%", "percent"},
		{"/a%4", "percent"},
		{"/a%g0", "percent"},
		{"/a?b", "charset"},
		{"/a'b", "charset"},
		{"/a[b]", "charset"},
		{"/" + strings.Repeat("a", 1023), ""},
		{"/" + strings.Repeat("a", 1024), "length"},
	} {
		_, err := Path(tc.in, PathPrefix)
		if got := ruleOf(err); got != tc.rule {
			t.Errorf("Path(%s): rule %q, want %q (%v)", Printable(tc.in), got, tc.rule, err)
		}
	}
	if _, err := Path("/", 0); ruleOf(err) != "kind" {
		t.Errorf("unknown kind accepted")
	}
}

func TestScalars(t *testing.T) {
	if d, err := Duration("1500ms", 0, time.Minute); err != nil || d != 1500*time.Millisecond {
		t.Errorf("Duration: %v %v", d, err)
	}
	if _, err := Duration("2m", 0, time.Minute); ruleOf(err) != "range" {
		t.Errorf("Duration range: %v", err)
	}
	if n, err := Int("-12", -100, 100); err != nil || n != -12 {
		t.Errorf("Int: %v %v", n, err)
	}
	for _, bad := range []string{"+1", "1.0", "1e3", "0x10", "", "-"} {
		if _, err := Int(bad, -100, 100); err == nil {
			t.Errorf("Int(%q) accepted", bad)
		}
	}
	if _, err := Bool("TRUE"); err == nil {
		t.Errorf("Bool(TRUE) accepted")
	}
	if v, err := URL("HTTPS://example.com/a%2Fb?q=1"); err != nil || v.String() != "https://example.com/a%2Fb?q=1" {
		t.Errorf("URL: %v %v", v, err)
	}
	if _, err := URL("https://Example.com/"); ruleOf(err) != "host" {
		t.Errorf("URL with upper-case host: %v", err)
	}
	if v, err := URL("https://example.com/a b"); err == nil {
		t.Errorf("URL with space accepted: %v", v)
	}
	if a, err := IP("::ffff:10.1.2.3"); err != nil || a.String() != "10.1.2.3" {
		t.Errorf("IP unmap: %v %v", a, err)
	}
	for _, bad := range []string{"0.0.0.0", "::", "224.0.0.1", "fe80::1%eth0", "10.0.0.1 ", "010.0.0.1"} {
		if _, err := IP(bad); err == nil {
			t.Errorf("IP(%q) accepted", bad)
		}
	}
	if p, err := CIDR("10.1.2.3/8"); err != nil || p.String() != "10.0.0.0/8" {
		t.Errorf("CIDR: %v %v", p, err)
	}
	if _, err := Port(0); err == nil {
		t.Errorf("Port(0) accepted")
	}
}

// TestAnchoring is the CVE-2026-1580 regression: a valid value followed
// (or preceded) by a suffix outside the value's language must be refused.
// A line feed, a single quote and a space leave every language; "X" and
// ";evil" leave those that do not allow them (a path may end in "X").
func TestAnchoring(t *testing.T) {
	type validator struct {
		name, valid string
		fn          func(string) error
		closed      bool // "X" and ";evil" are outside the language too
	}
	vs := []validator{
		{"Host", "example.com", func(s string) error { _, e := Host(s); return e }, true},
		{"WildcardHost", "*.example.com", func(s string) error { _, e := WildcardHost(s); return e }, true},
		{"Path", "/foo", func(s string) error { _, e := Path(s, PathExact); return e }, false},
		{"HeaderName", "X-Foo", func(s string) error { _, e := HeaderName(s); return e }, false},
		{"HeaderValue", "text/html", func(s string) error { _, e := HeaderValue(s); return e }, false},
		{"Duration", "30s", func(s string) error { _, e := Duration(s, 0, time.Hour); return e }, true},
		{"Int", "42", func(s string) error { _, e := Int(s, 0, 1000); return e }, true},
		{"Enum", "GET", func(s string) error { _, e := Enum(s, "GET", "POST"); return e }, true},
		{"Bool", "true", func(s string) error { _, e := Bool(s); return e }, true},
		{"URL", "https://example.com/", func(s string) error { _, e := URL(s); return e }, false},
		{"CIDR", "10.0.0.0/8", func(s string) error { _, e := CIDR(s); return e }, true},
		{"IP", "10.0.0.1", func(s string) error { _, e := IP(s); return e }, true},
	}
	for _, v := range vs {
		if err := v.fn(v.valid); err != nil {
			t.Fatalf("%s refuses its valid example: %v", v.name, err)
		}
		cases := []string{v.valid + "\n", v.valid + "'", v.valid + " ", " " + v.valid, v.valid + "\nhttp-request deny"}
		if v.closed {
			cases = append(cases, v.valid+"X", v.valid+";evil", "X"+v.valid)
		} else if v.name != "HeaderValue" { // "text/html ;evil" is a header value
			cases = append(cases, v.valid+" ;evil")
		}
		for _, c := range cases {
			if err := v.fn(c); err == nil {
				t.Errorf("%s accepted %s", v.name, Printable(c))
			}
		}
	}
	// The closed-language rule also holds for these, through their own
	// characters: HeaderName refuses ';', Path refuses ' '.
	if _, err := HeaderName("X-Foo;evil"); err == nil {
		t.Errorf("HeaderName accepted ;evil")
	}
}

func TestPrintable(t *testing.T) {
	got := Printable("a\n\"\\\u202e" + strings.Repeat("z", 100))
	if strings.ContainsAny(got, "\n\u202e") || !strings.HasSuffix(got, "(107 bytes)") {
		t.Fatalf("Printable: %s", got)
	}
	if !strings.HasPrefix(got, `a\x0a\"\\\xe2\x80\xae`) {
		t.Fatalf("Printable: %s", got)
	}
}

func TestRouteKey(t *testing.T) {
	good := []struct{ host, path, want string }{
		{"foo.com", "/a", "foo.com/a/"},
		{"*.foo.com", "/a/b", "*.foo.com/a/b/"},
		{"", "/a", "/a/"},
		{"", "/", "//"},
		{"foo.com", "", "foo.com"},
		{"*.foo.com", "", "*.foo.com"},
	}
	for _, c := range good {
		w := RouteKey(c.host, c.path)
		if w.Err() != nil || w.String() != c.want {
			t.Errorf("RouteKey(%q, %q) = %q, %v; want %q", c.host, c.path, w.String(), w.Err(), c.want)
		}
		if _, err := MapLine(w, ID("be_", "x")); err != nil {
			t.Errorf("MapLine(%q): %v", w.String(), err)
		}
	}
	bad := [][2]string{
		{"", ""}, {"foo.com", "/a b"}, {"foo.com", "/a\tb"}, {"foo.com", "/a\nx y"},
		{"foo .com", "/"}, {"Foo.com", "/"}, {"foo.com", "a"}, {"#x", "/"},
		{"foo.com", "/a\x00"}, {"foo.com", "/a'b"}, {"*.*.foo.com", "/"}, {"foo.com/x", "/"},
		{"foo.com:80", "/"}, {"foo.com", "/a/../b"},
	}
	for _, c := range bad {
		if w := RouteKey(c[0], c[1]); w.Err() == nil {
			t.Errorf("RouteKey(%q, %q) = %q, want an error", c[0], c[1], w.String())
		}
	}
}

// TestHeaderSetValue: what a header change may set, and the word each
// value becomes: single-quoted, or double-quoted when it holds a single
// quote; '%' doubled for log-format.
func TestHeaderSetValue(t *testing.T) {
	for _, tc := range []struct {
		in, line, refused string
	}{
		{in: "max-age=31536000", line: `'max-age=31536000'`},
		{in: "default-src 'self'; script-src 'self' 'unsafe-inline'", line: `"default-src 'self'; script-src 'self' 'unsafe-inline'"`},
		{in: `geolocation=(self "https://a.example")`, line: `'geolocation=(self "https://a.example")'`},
		{in: "50% #1", line: `'50%% #1'`},
		{in: "it's 100%", line: `"it's 100%%"`},
		{in: `'a' "b"`, refused: "both single and double quotes"},
		{in: `a\b`, refused: `\ and $ are refused`},
		{in: "$HOME", refused: `\ and $ are refused`},
		{in: "a\r\nb", refused: "control"},
		{in: " a", refused: "space"},
		{in: "", refused: "empty"},
	} {
		v, err := HeaderSetValue(tc.in)
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("%q: %v, want refused for %q", tc.in, err, tc.refused)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		line, err := ConfigLine(v.HeaderSetWord())
		if err != nil || line != tc.line {
			t.Errorf("%q: line %s, %v; want %s", tc.in, line, err, tc.line)
		}
	}
	// The double-quoted form is for config lines: the other emitters
	// refuse a single quote.
	v, _ := HeaderSetValue("'self'")
	if _, err := MapLine(v.HeaderSetWord(), ID("be_", "x")); err == nil {
		t.Error("a map line took a single quote")
	}
	if _, err := ConfigLine(v.Word()); err == nil {
		t.Error("a single-quoted word took a single quote")
	}
}

// TestPathBelow: the prefix below a Prefix path is the path and "/", one
// byte over MaxPathLen for the longest path; what Path refuses, and a
// base that already ends with "/", are refused.
func TestPathBelow(t *testing.T) {
	longest := "/" + strings.Repeat("a", MaxPathLen-1)
	for _, tc := range []struct{ in, want, rule string }{
		{"/foo", "/foo/", ""},
		{"/a/b", "/a/b/", ""},
		{longest, longest + "/", ""},
		{longest + "a", "", "length"},
		{"/", "", "sequence"},
		{"/foo/", "", "sequence"},
		{"foo", "", "absolute"},
		{"/a b", "", "charset"},
	} {
		w, err := PathBelow(tc.in)
		if got := ruleOf(err); got != tc.rule {
			t.Errorf("PathBelow(%.20s…): rule %q, want %q (%v)", tc.in, got, tc.rule, err)
			continue
		}
		if err == nil && (w.s != tc.want || !w.quote) {
			t.Errorf("PathBelow(%.20s…) = %+v, want %q quoted", tc.in, w, tc.want)
		}
	}
}
