package ipam

import (
	"net/netip"
	"testing"
)

func TestParsePool(t *testing.T) {
	tests := []struct {
		cidr, first, last string
	}{
		{"127.10.0.0/16", "127.10.0.1", "127.10.255.254"},
		{"10.0.0.0/30", "10.0.0.1", "10.0.0.2"},
		{"10.0.0.0/31", "10.0.0.0", "10.0.0.1"}, // RFC 3021: both usable
		{"10.0.0.7/32", "10.0.0.7", "10.0.0.7"},
		{"fd00::/126", "fd00::", "fd00::3"}, // IPv6 has no broadcast
		{"2001:db8::/64", "2001:db8::", "2001:db8::ffff:ffff:ffff:ffff"},
	}
	for _, tc := range tests {
		t.Run(tc.cidr, func(t *testing.T) {
			p, err := ParsePool("--internal-pool", tc.cidr)
			if err != nil {
				t.Fatal(err)
			}
			if p.first.String() != tc.first || p.last.String() != tc.last {
				t.Fatalf("range = %s-%s, want %s-%s", p.first, p.last, tc.first, tc.last)
			}
			if p.String() != tc.cidr && tc.cidr != "10.0.0.7/32" {
				t.Fatalf("String() = %s", p)
			}
		})
	}
}

func TestParsePoolErrors(t *testing.T) {
	tests := []struct{ cidr, want string }{
		{"10.0.0.0/33", "--internal-pool 10.0.0.0/33: prefix length 33 is out of range for IPv4 (0-32)"},
		{"fd00::/129", "--internal-pool fd00::/129: prefix length 129 is out of range for IPv6 (0-128)"},
		{"10.0.0.5/24", "--internal-pool 10.0.0.5/24: host bits are set; did you mean 10.0.0.0/24?"},
		{"10.0.0.0", "--internal-pool 10.0.0.0: not a CIDR prefix: want address/length, such as 127.10.0.0/16"},
		{"10.0.0/8", `--internal-pool 10.0.0/8: "10.0.0" is not an IP address`},
		{"10.0.0.0/-1", `--internal-pool 10.0.0.0/-1: prefix length "-1" is not a number`},
		{"10.0.0.0/+8", `--internal-pool 10.0.0.0/+8: prefix length "+8" is not a number`},
		{"10.0.0.0/", `--internal-pool 10.0.0.0/: prefix length "" is not a number`},
		{"::ffff:10.0.0.0/120", "--internal-pool ::ffff:10.0.0.0/120: IPv4-mapped IPv6 address; write the IPv4 prefix instead"},
		{"fe80::%eth0/64", "--internal-pool fe80::%eth0/64: an IPv6 zone is not allowed in a pool"},
	}
	for _, tc := range tests {
		t.Run(tc.cidr, func(t *testing.T) {
			_, err := ParsePool("--internal-pool", tc.cidr)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error = %v\nwant    %s", err, tc.want)
			}
		})
	}
}

func TestPoolContains(t *testing.T) {
	p, err := ParsePool("--internal-pool", "127.10.0.0/16")
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"127.10.0.0":     false, // the /16's network address
		"127.10.255.255": false, // the /16's broadcast address
		"127.10.0.255":   true,  // .255 in the middle of a /16 is a host
		"127.10.1.0":     true,  // so is .0
		"127.10.0.1":     true,
		"127.11.0.1":     false,
		"::1":            false,
	} {
		if got := p.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("Contains(%s) = %v, want %v", addr, got, want)
		}
	}
	if (Pool{}).Contains(netip.MustParseAddr("127.10.0.1")) {
		t.Error("zero Pool contains an address")
	}
}

func TestPoolOverlaps(t *testing.T) {
	a, _ := ParsePool("a", "127.10.0.0/16")
	b, _ := ParsePool("b", "127.20.0.0/16")
	c, _ := ParsePool("c", "127.10.5.0/24")
	if a.Overlaps(b) || !a.Overlaps(c) {
		t.Fatalf("Overlaps: a/b %v (want false), a/c %v (want true)", a.Overlaps(b), a.Overlaps(c))
	}
}

func TestPoolSize(t *testing.T) {
	for cidr, want := range map[string]uint64{
		"10.0.0.0/24": 254, "10.0.0.0/28": 14, "10.0.0.0/31": 2, "10.0.0.7/32": 1,
		"2001:db8::/120": 256, "2001:db8::/64": 1 << 62,
	} {
		p, err := ParsePool("--pool", cidr)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Size(); got != want {
			t.Errorf("%s: size %d, want %d", cidr, got, want)
		}
	}
}
