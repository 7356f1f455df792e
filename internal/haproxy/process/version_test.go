package process

import "testing"

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Version
	}{
		{"HAProxy version 2.6.12-1+deb12u2 2025/04/15 - https://haproxy.org/\nStatus: long-term", Version{2, 6}},
		{"HAProxy version 3.0.11-1+deb13u5 2026/11/18 - https://haproxy.org/", Version{3, 0}},
		{"HAProxy version 3.2-dev5 2025/02/08", Version{3, 2}},
	} {
		got, err := ParseVersion(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "nginx version: 1.22", "HAProxy version x.y"} {
		if _, err := ParseVersion(in); err == nil {
			t.Errorf("ParseVersion(%q): no error", in)
		}
	}
	if !(Version{3, 0}).AtLeast(2, 6) || (Version{2, 6}).AtLeast(3, 0) || !(Version{3, 0}).AtLeast(3, 0) {
		t.Error("AtLeast")
	}
}
