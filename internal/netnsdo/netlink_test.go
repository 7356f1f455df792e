//go:build linux

package netnsdo_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/topo"
)

// TestNetlink changes a node namespace's addresses and local routes over
// netlink and reads its neighbour table, and checks each against what
// ip(8), which these functions replace, sees there.
func TestNetlink(t *testing.T) {
	top := topo.New(t, topo.Options{Nodes: 2})
	n0, n1 := top.Nodes[0], top.Nodes[1]
	ipSays := func(args ...string) string {
		t.Helper()
		out, err := n0.Command(context.Background(), "ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	vip := netip.MustParseAddr("10.99.1.5")
	if err := netnsdo.AddAddress(n0.NS, "eth0", vip); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(ipSays("-o", "addr", "show", "dev", "eth0"), " inet 10.99.1.5/32 ") || !n0.Has(vip) {
		t.Fatalf("address not on eth0: %s", ipSays("addr", "show", "dev", "eth0"))
	}
	if err := netnsdo.AddAddress(n0.NS, "eth0", vip); err == nil {
		t.Error("adding an address that is there already: no error")
	}
	for range 2 { // the second time it is not there: no error either
		if err := netnsdo.DeleteAddress(n0.NS, "eth0", vip); err != nil {
			t.Fatal(err)
		}
	}
	if n0.Has(vip) {
		t.Fatal("address still on eth0 after DeleteAddress")
	}

	const proto = 213
	local := []netip.Addr{netip.MustParseAddr("10.99.1.6"), netip.MustParseAddr("fd00:99::6")}
	for _, a := range local {
		for range 2 { // a replace: twice is fine
			if err := netnsdo.AddLocalRoute(n0.NS, a, proto); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := ipSays("route", "show", "table", "local", "proto", "213"); !strings.Contains(got, "local 10.99.1.6 dev lo scope host") {
		t.Errorf("ip route: %q, want the local route of 10.99.1.6", got)
	}
	if got := ipSays("-6", "route", "show", "table", "local", "proto", "213"); !strings.Contains(got, "local fd00:99::6 dev lo") {
		t.Errorf("ip -6 route: %q, want the local route of fd00:99::6", got)
	}
	got, err := netnsdo.LocalRoutes(n0.NS, proto)
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, netip.Addr.Compare)
	if !slices.Equal(got, local) {
		t.Errorf("LocalRoutes = %v, want %v", got, local)
	}
	if other, err := netnsdo.LocalRoutes(n0.NS, proto+1); err != nil || len(other) != 0 {
		t.Errorf("LocalRoutes of another tag = %v, %v; want none", other, err)
	}
	if err := netnsdo.DeleteLocalRoute(n0.NS, local[0], proto); err != nil {
		t.Fatal(err)
	}
	if err := netnsdo.FlushLocalRoutes(n0.NS, proto); err != nil {
		t.Fatal(err)
	}
	if got := ipSays("route", "show", "table", "all", "proto", "213"); strings.TrimSpace(got) != "" {
		t.Errorf("routes left after the flush: %q", got)
	}

	if _, err := netnsdo.Neighbour(n0.NS, "eth0", n1.Addr); err == nil {
		t.Error("a MAC address for a neighbour never heard of")
	}
	ipSays("neigh", "replace", n1.Addr.String(), "lladdr", "02:00:00:00:00:01", "dev", "eth0", "nud", "stale")
	mac, err := netnsdo.Neighbour(n0.NS, "eth0", n1.Addr)
	if want, _ := net.ParseMAC("02:00:00:00:00:01"); err != nil || mac.String() != want.String() {
		t.Errorf("Neighbour = %v, %v; want %s", mac, err, want)
	}
}
