package cluster

import "testing"

func TestParseExitMode(t *testing.T) {
	for _, s := range []string{"stay", "handover", "drain"} {
		if m, err := ParseExitMode(s); err != nil || string(m) != s {
			t.Errorf("ParseExitMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "Handover", "hand-over", "stay "} {
		if _, err := ParseExitMode(s); err == nil {
			t.Errorf("ParseExitMode(%q) accepted", s)
		}
	}
}
