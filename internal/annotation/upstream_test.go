package annotation

import "testing"

// TestTriesParser: proxy-next-upstream-tries reads 0 as the largest and
// refuses the rest.
func TestTriesParser(t *testing.T) {
	for in, want := range map[string]int{"1": 1, "3": 3, "11": 11, "0": 11} {
		if got, err := parseTries(in); err != nil || got != want {
			t.Errorf("parseTries(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"12", "-1", "3;evil", "three", ""} {
		if _, err := parseTries(bad); err == nil {
			t.Errorf("parseTries(%q) accepted", bad)
		}
	}
}
