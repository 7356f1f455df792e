package encode

import "testing"

// SNIString takes a host and nothing else: the argument of str() must
// hold no ')', ',' or space that would end or split the expression.
func TestSNIString(t *testing.T) {
	w, err := SNIString("api.internal")
	if err != nil || w.String() != "str(api.internal)" {
		t.Fatalf("%q %v", w.String(), err)
	}
	if line, err := ConfigLine(Lit("sni"), w); err != nil || line != "sni str(api.internal)" {
		t.Errorf("line %q %v", line, err)
	}
	for _, bad := range []string{"", "api.internal;evil", "api.internal)", "api.internal,x", "a b", "API.internal", "*.internal",
		"api.internal\n", "api.internal'", "10.0.0.1", "api.internal:443"} {
		if _, err := SNIString(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
