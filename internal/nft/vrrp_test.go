package nft

import (
	"bytes"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func guards() []VRRPGuard {
	a := netip.MustParseAddr
	return []VRRPGuard{
		{Interface: "eth0", RouterID: 7, Peers: []netip.Addr{a("10.99.0.12")}},
		{Interface: "eth0", RouterID: 3, Peers: []netip.Addr{a("10.99.0.13"), a("10.99.0.12"), a("10.99.0.13")}},
		{Interface: "bond0.12", RouterID: 3, Peers: []netip.Addr{a("fd00::12")}},
	}
}

func TestVRRPGolden(t *testing.T) {
	got, err := RenderVRRP(guards())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "vrrp.nft", got)
	rev := guards()
	rev[0], rev[2] = rev[2], rev[0]
	again, err := RenderVRRP(rev)
	if err != nil || !bytes.Equal(got, again) {
		t.Fatalf("two renders of the same guards differ (%v)", err)
	}
	empty, err := RenderVRRP(nil)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "vrrp-none.nft", empty)
}

// nft itself parses the rendering (check mode: nothing is committed).
func TestVRRPParses(t *testing.T) {
	if _, err := exec.LookPath("nft"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs nft and root")
	}
	got, err := RenderVRRP(guards())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("nft", "-c", "-f", "-")
	cmd.Stdin = bytes.NewReader(got)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft -c: %v: %s\n%s", err, out, got)
	}
}

func TestVRRPRefuses(t *testing.T) {
	a := netip.MustParseAddr
	for name, g := range map[string]VRRPGuard{
		"quote in the interface": {Interface: `eth0" accept #`, RouterID: 1, Peers: []netip.Addr{a("10.0.0.1")}},
		"long interface":         {Interface: strings.Repeat("e", 16), RouterID: 1, Peers: []netip.Addr{a("10.0.0.1")}},
		"router id 0":            {Interface: "eth0", RouterID: 0, Peers: []netip.Addr{a("10.0.0.1")}},
		"router id 256":          {Interface: "eth0", RouterID: 256, Peers: []netip.Addr{a("10.0.0.1")}},
		"no peer":                {Interface: "eth0", RouterID: 1},
		"two families":           {Interface: "eth0", RouterID: 1, Peers: []netip.Addr{a("10.0.0.1"), a("fd00::1")}},
		"zone":                   {Interface: "eth0", RouterID: 1, Peers: []netip.Addr{a("fe80::1%eth0")}},
	} {
		if _, err := RenderVRRP([]VRRPGuard{g}); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	dup := []VRRPGuard{{Interface: "eth0", RouterID: 1, Peers: []netip.Addr{a("10.0.0.1")}},
		{Interface: "eth0", RouterID: 1, Peers: []netip.Addr{a("10.0.0.2")}}}
	if _, err := RenderVRRP(dup); err == nil {
		t.Errorf("one router id twice on an interface: rendered")
	}
}
