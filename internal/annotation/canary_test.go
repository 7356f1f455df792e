package annotation

import "testing"

// TestCanaryParsers: canary-by-header-value and -pattern refuse what
// they cannot match exactly.
func TestCanaryParsers(t *testing.T) {
	for _, v := range []string{"v2;evil", "a,b", "a'b", "a\"b", "%[src]"} {
		if _, err := parseCanaryHeaderValue(v); err == nil {
			t.Errorf("canary-by-header-value %q accepted", v)
		}
	}
	for _, v := range []string{"v2 ;evil", "(?i)v2", "(a+)+", `\bv2`, "a\nb", "", "v2'\n"} {
		if _, err := parseCanaryHeaderPattern(v); err == nil {
			t.Errorf("canary-by-header-pattern %q accepted", v)
		}
	}
}
