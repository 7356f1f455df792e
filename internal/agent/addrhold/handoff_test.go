package addrhold

import (
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestHandoffScript(t *testing.T) {
	in := &Instance{Name: "vr3", PeerAddress: netip.MustParseAddr("10.99.0.12"),
		Addresses: []netip.Addr{netip.MustParseAddr("10.99.0.129"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("10.99.0.193")}}
	mac, _ := net.ParseMAC("32:6c:a8:0b:23:f2")
	got := handoffScript("eth0", "vr3", mac, in)
	want := `add table netdev pier_handoff_vr3
add set netdev pier_handoff_vr3 mine { type ipv4_addr . inet_service . ipv4_addr . inet_service; size 262144; flags timeout; timeout 3s; }
add chain netdev pier_handoff_vr3 in { type filter hook ingress device "eth0" priority 0; policy accept; }
flush chain netdev pier_handoff_vr3 in
add rule netdev pier_handoff_vr3 in ip daddr { 10.99.0.129, 10.99.0.193 } tcp flags & (syn | ack) == syn add @mine { ip saddr . tcp sport . ip daddr . tcp dport }
add rule netdev pier_handoff_vr3 in ip daddr { 10.99.0.129, 10.99.0.193 } ether saddr != 32:6c:a8:0b:23:f2 ip saddr . tcp sport . ip daddr . tcp dport != @mine counter fwd ip to 10.99.0.12 device "eth0"
`
	if got != want {
		t.Errorf("script:\n%s\nwant:\n%s", got, want)
	}
}

func TestHandoffKeyRefuses(t *testing.T) {
	v4 := &Instance{PeerAddress: netip.MustParseAddr("10.99.0.12"), Addresses: []netip.Addr{netip.MustParseAddr("10.99.0.129")}}
	for _, tc := range []struct {
		name  string
		iface string
		in    *Instance
	}{
		{"quote in the interface name", `eth0" ; flush ruleset ; "`, v4},
		{"interface name too long", strings.Repeat("e", 16), v4},
		{"no peer address", "eth0", &Instance{Addresses: v4.Addresses}},
		{"IPv6 only", "eth0", &Instance{PeerAddress: v4.PeerAddress, Addresses: []netip.Addr{netip.MustParseAddr("2001:db8::1")}}},
	} {
		if k := handoffKey(tc.iface, tc.in); k != "" {
			t.Errorf("%s: key %q, want none (no table)", tc.name, k)
		}
	}
	if handoffKey("eth0", v4) == "" {
		t.Error("a valid instance has no key")
	}
}
