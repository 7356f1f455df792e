package encode

import "testing"

func TestCookieNameAndPath(t *testing.T) {
	for _, ok := range []string{"INGRESSCOOKIE", "route_id", "a-b", "x"} {
		if _, err := CookieName(ok); err != nil {
			t.Errorf("cookie name %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "route;evil", "a b", "a=b", "a'", "a\n", "a%20", "é", "a.b",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"} {
		if _, err := CookieName(bad); err == nil {
			t.Errorf("cookie name %q accepted", bad)
		}
	}
	if v, err := CookiePathAttr("/app/v1.2"); err != nil || v.String() != "Path=/app/v1.2" {
		t.Errorf("cookie path: %q %v", v.String(), err)
	}
	for _, bad := range []string{"", "app", "/app;evil", "/a b", "/a%20b", "/a'", "/a\n", "//a", "/a/../b", "/a=b", "/a,b"} {
		if _, err := CookiePathAttr(bad); err == nil {
			t.Errorf("cookie path %q accepted", bad)
		}
	}
}

// SetCookieRegex: a valid cookie name gives the anchored regex as one
// quoted word; anything else is refused, ";evil" included.
func TestSetCookieRegex(t *testing.T) {
	w, err := SetCookieRegex("route_id-1")
	if err != nil {
		t.Fatal(err)
	}
	line, err := ConfigLine(Lit("http-after-response"), Lit("replace-header"), Lit("Set-Cookie"), w, Lit("\\1; Secure"))
	if err != nil || line != `http-after-response replace-header Set-Cookie '^(route_id-1=.*)$' '\1; Secure'` {
		t.Errorf("line %q, %v", line, err)
	}
	for _, bad := range []string{"", "route;evil", "a.b", "a*", "a)", "a\nb", "a'b"} {
		if _, err := SetCookieRegex(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
