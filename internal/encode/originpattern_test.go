package encode

import (
	"regexp"
	"testing"
)

func TestOriginPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern    string
		match, not []string
	}{
		{"https://*.example.com", []string{"https://a.example.com", "https://a.b.example.com"},
			[]string{"https://example.com", "http://a.example.com", "https://a.example.com:8443", "https://aexample.com",
				"https://a.example.com.evil", "https://a.example.comx", "https://evil/a.example.com"}},
		{"http://*.example.com:8080", []string{"http://a.example.com:8080"}, []string{"http://a.example.com", "http://a.example.com:80801"}},
		{"https://*", []string{"https://a.example", "https://a.example:8443", "https://localhost"},
			[]string{"http://a.example", "https://a.example/x", "https://a.example;evil", "null"}},
	} {
		w, err := OriginPattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		re := regexp.MustCompile(w.s)
		for _, m := range tc.match {
			if !re.MatchString(m) {
				t.Errorf("%s (%s) does not match %s", tc.pattern, w.s, m)
			}
		}
		for _, m := range tc.not {
			if re.MatchString(m) {
				t.Errorf("%s (%s) matches %s", tc.pattern, w.s, m)
			}
		}
	}
	for _, bad := range []string{"", "*", "https://a.example", "ftp://*.a.example", "https://*a.example", "https://a.*.example",
		"https://*.a.example;evil", "https://*.a.example'", "https://*.", "https://*.a.example/x", "https://*.*.example",
		"https://*.A.example", "https://*.[::1]", "https://*.a.example\n", "https://**"} {
		if _, err := OriginPattern(bad); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}
