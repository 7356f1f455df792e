package encode

import (
	"regexp"
	"strings"
	"testing"
)

// The spec's ReplacePrefixMatch table (HTTPPathModifier), run through the
// regex and replacement with Go's engine (the expression uses nothing
// PCRE2 and RE2 read differently); the integration test runs it in
// HAProxy.
func TestPrefixReplaceTable(t *testing.T) {
	for _, tc := range []struct{ path, prefix, repl, want string }{
		{"/foo/bar", "/foo", "/xyz", "/xyz/bar"},
		{"/foo", "/foo", "/xyz", "/xyz"},
		{"/foo/", "/foo", "/xyz", "/xyz/"},
		{"/foo/bar", "/foo", "", "/bar"},
		{"/foo/", "/foo", "", "/"},
		{"/foo", "/foo", "", "/"},
		{"/a.b/c", "/a.b", "/v1.2", "/v1.2/c"},
		{"/", "", "/xyz", "/xyz/"},
		{"/bar", "", "/xyz", "/xyz/bar"},
		{"/bar", "", "", "/bar"},
	} {
		re, repl, err := PrefixReplace(tc.prefix, tc.repl)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		got := regexp.MustCompile(re.s).ReplaceAllString(tc.path, strings.ReplaceAll(repl.s, `\1`, "${1}"))
		if got != tc.want {
			t.Errorf("%s with %q -> %q: %q, want %q", tc.path, tc.prefix, tc.repl, got, tc.want)
		}
	}
	// "." is literal: /aXb is not under /a.b.
	re, _, _ := PrefixReplace("/a.b", "/c")
	if regexp.MustCompile(re.s).MatchString("/aXb/c") {
		t.Error(`"." matches any byte`)
	}
}

func TestPrefixReplaceRefuses(t *testing.T) {
	for _, tc := range [][2]string{
		{"/a;evil", "/b"}, {"/a", "/b;evil"}, {"/a(.*)", "/b"}, {"/a", `/b\1`}, {"/a/", "/b"}, {"/a", "/b/"},
		{"a", "/b"}, {"/a", "b"}, {"/a", "/b%25"}, {"/a", "/b'"}, {"/a\n", "/b"}, {"/a//b", "/c"}, {"/a", "/$1"},
	} {
		if _, _, err := PrefixReplace(tc[0], tc[1]); err == nil {
			t.Errorf("PrefixReplace(%q, %q) accepted", tc[0], tc[1])
		}
	}
}

func TestRedirectLocation(t *testing.T) {
	for _, tc := range []struct {
		scheme, host string
		port         int
		want         string
	}{
		{"http", "", 0, "http://%[var(txn.pier_rhost)]%[pathq]"},
		{"https", "", 8443, "https://%[var(txn.pier_rhost)]:8443%[pathq]"},
		{"https", "a.example", 0, "https://a.example%[pathq]"},
		{"http", "a.example", 8080, "http://a.example:8080%[pathq]"},
	} {
		w, err := RedirectLocation(tc.scheme, tc.host, tc.port)
		if err != nil || w.s != tc.want || !w.quote {
			t.Errorf("%+v: %q %v", tc, w.s, err)
		}
	}
	for _, tc := range []struct {
		scheme, host string
		port         int
	}{
		{"ftp", "", 0}, {"https;evil", "", 0}, {"HTTP", "", 0}, {"http", "a.example;evil", 0}, {"http", "a.example/x", 0},
		{"http", "*.a.example", 0}, {"http", "%[src]", 0}, {"http", "a.example\r\n", 0}, {"http", "", 70000}, {"http", "", -1},
	} {
		if w, err := RedirectLocation(tc.scheme, tc.host, tc.port); err == nil {
			t.Errorf("%+v accepted: %q", tc, w.s)
		}
	}
}

func TestModifiableHeader(t *testing.T) {
	for _, ok := range []string{"X-A", "x-custom-1", "Cache-Control", "Strict-Transport-Security", "Server"} {
		if _, err := ModifiableHeader(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"X-A;evil", "X-A X", "X-A:", "", "Content-Length", "transfer-encoding", "CONNECTION",
		"Host", "Upgrade", "TE", "Trailer", "Keep-Alive", "Proxy-Connection", "X-A\r\nX-B", "X_A"} {
		if _, err := ModifiableHeader(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzRedirectLocation: a host is refused with a printable message, or
// the Location word is exactly scheme://host[:port]%[pathq], the host
// holding no "%" (no sample expression of the user's), and the line
// tokenizes into the intended words.
func FuzzRedirectLocation(f *testing.F) {
	seed(f, "a.example", "xn--bcher-kva.example", "a-1.b-2")
	f.Fuzz(func(t *testing.T, host string) {
		w, err := RedirectLocation("https", host, 8443)
		if err != nil {
			checkMessage(t, err)
			return
		}
		want := "https://" + host + ":8443%[pathq]"
		if host == "" {
			want = "https://%[var(" + RedirectHostVar + ")]:8443%[pathq]"
		}
		if strings.Contains(host, "%") || w.s != want {
			t.Fatalf("location %s for host %s", Printable(w.s), Printable(host))
		}
		line, err := ConfigLine(Lit("http-request"), Lit("redirect"), Lit("location"), w)
		if err != nil {
			t.Fatal(err)
		}
		assertTokens(t, line, "http-request", "redirect", "location", w.s)
	})
}

// FuzzPrefixReplace: a prefix is refused with a printable message, or
// the regex matches exactly the paths under it (element-wise) and the
// line tokenizes into the intended words.
func FuzzPrefixReplace(f *testing.F) {
	seed(f, "/foo", "/a.b", "/v1/api", "/~u")
	f.Fuzz(func(t *testing.T, prefix string) {
		re, repl, err := PrefixReplace(prefix, "/x")
		if err != nil {
			checkMessage(t, err)
			return
		}
		r := regexp.MustCompile(re.s)
		for _, p := range []string{prefix, prefix + "/", prefix + "/z"} {
			if !r.MatchString(p) {
				t.Fatalf("%s does not match %s", re.s, Printable(p))
			}
		}
		if r.MatchString(prefix+"z") || r.MatchString("x"+prefix) {
			t.Fatalf("%s matches outside %s", re.s, Printable(prefix))
		}
		line, err := ConfigLine(Lit("http-request"), Lit("replace-path"), re, repl)
		if err != nil {
			t.Fatal(err)
		}
		assertTokens(t, line, "http-request", "replace-path", re.s, repl.s)
	})
}
