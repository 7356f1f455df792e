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
