package encode

import "testing"

func TestOriginAndMethod(t *testing.T) {
	for _, ok := range []string{"https://a.example", "http://localhost:3000", "https://[2001:db8::1]:8443", "http://10.0.0.1"} {
		if _, err := Origin(ok); err != nil {
			t.Errorf("origin %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "*", "null", "https://a.example/", "https://a.example;evil", "https://a.example'",
		"https://A.example", "ftp://a.example", "https://a.example?x", "https://u@a.example", "https://a.example#x",
		"https://*.a.example", "https://a.example%2f", "https://a.example\n", "https://a.example:0", "https://a.example,https://b"} {
		if _, err := Origin(bad); err == nil {
			t.Errorf("origin %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "get", "GET;", "GET POST", "GETGETGETGETGETGETGETGET"} {
		if _, err := Method(bad); err == nil {
			t.Errorf("method %q accepted", bad)
		}
	}
	m, _ := Method("GET")
	h, _ := HeaderName("X-A")
	if v, err := JoinList([]Value{m, h}); err != nil || v.String() != "GET, X-A" {
		t.Errorf("JoinList: %q %v", v.String(), err)
	}
}
