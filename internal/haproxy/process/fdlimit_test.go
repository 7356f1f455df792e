package process

import "testing"

func TestParseFDShortfall(t *testing.T) {
	for _, c := range []struct {
		out  string
		want FDShortfall
		ok   bool
	}{
		{"[NOTICE]   (1) : Reloading HAProxy\n[WARNING]  (1) : [haproxy.main()] Cannot raise FD limit to 21907, limit is 20000.\n", FDShortfall{21907, 20000}, true},
		{"[ALERT]    (1) : [haproxy.main()] Cannot raise FD limit to 9000, limit is 512.\n[WARNING]  (1) : Cannot raise FD limit to 9100, limit is 512.", FDShortfall{9100, 512}, true},
		{"[NOTICE]   (1) : haproxy version is 2.6.12\n", FDShortfall{}, false},
		{"", FDShortfall{}, false},
	} {
		got, ok := parseFDShortfall(c.out)
		if got != c.want || ok != c.ok {
			t.Errorf("parseFDShortfall(%q) = %+v, %v; want %+v, %v", c.out, got, ok, c.want, c.ok)
		}
	}
}
