package encode

import (
	"net/netip"
	"testing"
)

// TestAddMap: a landing route key goes to the runtime API as sent, with
// every route-key character but ';' (the CLI's command separator); the
// map is named by a file path only; values are pier's words only.
func TestAddMap(t *testing.T) {
	file := FilePath("/var/lib/pier/haproxy/landing/host.prefix.map")
	key := LandingKey(12, RouteKey("shop.example", "/a~!$&()*+,=:@%41-_."))
	c, err := AddMap(file, key, Lit("pier_landing_be_3"))
	if err != nil {
		t.Fatal(err)
	}
	want := "add map /var/lib/pier/haproxy/landing/host.prefix.map 12:shop.example/a~!$&()*+,=:@%41-_./ pier_landing_be_3"
	if c.String() != want {
		t.Fatalf("got  %q\nwant %q", c.String(), want)
	}
	if c, err := DelMap(file, LandingRoot(12)); err != nil || c.String() != "del map /var/lib/pier/haproxy/landing/host.prefix.map 12:" {
		t.Fatalf("DelMap: %q %v", c.String(), err)
	}
	if c, err := AddMap(file, Addr(netip.MustParseAddr("10.96.0.10")), Num(12)); err != nil || c.String() != "add map /var/lib/pier/haproxy/landing/host.prefix.map 10.96.0.10 12" {
		t.Fatalf("AddMap address: %q %v", c.String(), err)
	}
	for name, bad := range map[string]func() error{
		"';' in a key": func() error {
			_, err := AddMap(file, LandingKey(1, RouteKey("", "/a;b")), Lit("x"))
			return err
		},
		"a user value as the map": func() error {
			_, err := AddMap(RouteKey("", "/a"), LandingRoot(1), Lit("x"))
			return err
		},
		"a user value as the value": func() error {
			_, err := AddMap(file, LandingRoot(1), RouteKey("", "/a"))
			return err
		},
		"a negative id": func() error {
			_, err := AddMap(file, LandingRoot(-1), Lit("x"))
			return err
		},
		"a constant as a landing key": func() error {
			_, err := AddMap(file, LandingKey(1, Lit("x")), Lit("x"))
			return err
		},
	} {
		if bad() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
