package encode

import (
	"regexp"
	"testing"
)

func TestStripPrefixRegex(t *testing.T) {
	w, err := StripPrefixRegex("/api/v1.2")
	if err != nil || w.String() != `^/api/v1\.2(/|$)(.*)` {
		t.Fatalf("got %q, %v", w.String(), err)
	}
	re := regexp.MustCompile(w.String())
	for path, rest := range map[string]string{"/api/v1.2": "", "/api/v1.2/": "", "/api/v1.2/x/y": "x/y"} {
		m := re.FindStringSubmatch(path)
		if m == nil || m[2] != rest {
			t.Errorf("%s: %q, want rest %q", path, m, rest)
		}
	}
	for _, path := range []string{"/api/v1x2", "/api/v1.2x", "/API/v1.2"} {
		if re.MatchString(path) {
			t.Errorf("%s matched", path)
		}
	}
	for _, bad := range []string{"", "/", "/a/", "a", "/a;evil", "/a'", "/a b", "/a\n", "/a(b)", "/a$", "/a%20", "/a//b", "/a\\d", "/a|b", "/a*"} {
		if _, err := StripPrefixRegex(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestTailRewrite(t *testing.T) {
	w, err := TailRewrite("/v2/")
	if err != nil || w.String() != `/v2/\2` {
		t.Fatalf("got %q, %v", w.String(), err)
	}
	line, err := ConfigLine(Lit("http-request"), Lit("replace-path"), w)
	if err != nil || line != `http-request replace-path '/v2/\2'` {
		t.Fatalf("line %q, %v", line, err)
	}
	for _, bad := range []string{"", "/v2", "v2/", "/v2/;evil/", "/%[src]/", "/$1/", "/a'/", "/a b/", "/a\n/"} {
		if _, err := TailRewrite(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzStripRewriteWords: what StripPrefixRegex and TailRewrite accept
// emits as one config word, equal to what was built (the prefix with its
// dots escaped, the target with \2), and compiles as a regular
// expression that matches the prefix literally.
func FuzzStripRewriteWords(f *testing.F) {
	seed(f, "/api", "/shop.v1", "/v2/", "/", "/a(/|$)(.*)", "/a;evil", "/a'", "/%[src]/", "/a\\1/")
	f.Fuzz(func(t *testing.T, s string) {
		if w, err := StripPrefixRegex(s); err != nil {
			checkMessage(t, err)
		} else {
			line, err := ConfigLine(Lit("http-request"), Lit("replace-path"), w)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			assertTokens(t, line, "http-request", "replace-path", w.String())
			re, err := regexp.Compile(w.String())
			if err != nil || !re.MatchString(s) || re.MatchString(s+"x") || re.FindStringSubmatch(s + "/r")[2] != "r" {
				t.Fatalf("%q: regex %q (%v) does not match the prefix literally", s, w.String(), err)
			}
		}
		if w, err := TailRewrite(s); err != nil {
			checkMessage(t, err)
		} else {
			line, err := ConfigLine(Lit("http-request"), Lit("replace-path"), w)
			if err != nil {
				t.Fatalf("%q: %v", s, err)
			}
			assertTokens(t, line, "http-request", "replace-path", s+`\2`)
		}
	})
}
