package model

import "testing"

func TestParseAccessLog(t *testing.T) {
	for in, want := range map[string]AccessLog{"on": {1}, "off": {0}, "sample=1": {1}, "sample=50": {50}, "sample=999999": {999999}} {
		got, err := ParseAccessLog(in)
		if err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
		if back, _ := ParseAccessLog(got.String()); back != got {
			t.Errorf("%q does not round-trip through %q", in, got.String())
		}
	}
	for _, bad := range []string{"", "ON", "sample=", "sample=0", "sample=-1", "sample=1000000", "sample=+5", "sample=05", "sample=5 "} {
		if _, err := ParseAccessLog(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if got := AccessLogOf(&LoadBalancer{AccessLog: "bogus"}, AccessLogOn); got != AccessLogOn {
		t.Errorf("a bad stored value gives %v, want the default", got)
	}
}
