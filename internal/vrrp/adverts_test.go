//go:build linux

package vrrp

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/topo"
)

func TestParseAdvert(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		id   int
		ok   bool
	}{
		{"v3 advert", []byte{0x31, 42, 200, 1, 0, 10, 0, 0, 10, 99, 1, 10}, 42, true},
		{"v2 advert", []byte{0x21, 7, 100, 1, 1, 1, 0, 0}, 7, true},
		{"v3, priority 0 (a master resigning)", []byte{0x31, 9, 0, 1, 0, 10, 0, 0}, 9, true},
		{"short", []byte{0x31, 42, 200}, 0, false},
		{"version 4", []byte{0x41, 42, 200, 1, 0, 10, 0, 0}, 0, false},
		{"not an advertisement", []byte{0x32, 42, 200, 1, 0, 10, 0, 0}, 0, false},
		{"router id 0", []byte{0x31, 0, 200, 1, 0, 10, 0, 0}, 0, false},
	} {
		id, ok := parseAdvert(tc.b)
		if id != tc.id || ok != tc.ok {
			t.Errorf("%s: parseAdvert = %d, %v; want %d, %v", tc.name, id, ok, tc.id, tc.ok)
		}
	}
}

// TestAdvertsHeard: the standby hears the active node's adverts as its
// keepalived does, and stops hearing them when its input filter drops
// VRRP, as keepalived does: a split brain made by a firewall must not
// look healed.
func TestAdvertsHeard(t *testing.T) {
	topo.Skip(t, "keepalived", "nft")
	top := topo.New(t, topo.Options{Nodes: 2})
	var ks []*Keepalived
	for i := range 2 {
		k, err := NewKeepalived("", top.Nodes[i].NS, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Stop(t.Context()) })
		if err := k.Apply(t.Context(), pairConfig(t.TempDir(), top, i)); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	openActiveFirst(t, ks, func() bool { return slices.Equal(top.Holders(vip), []string{top.Nodes[0].Name}) })
	a, err := ListenAdverts(top.Nodes[1].NS)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	active := top.Nodes[0].Addr
	fresh := func() bool { return time.Since(a.LastHeard(42, active)) < 300*time.Millisecond }
	waitFor(t, "the active node holds", 3*time.Second, func() bool { return slices.Equal(top.Holders(vip), []string{top.Nodes[0].Name}) })
	waitFor(t, "the standby hears the active node's adverts", 2*time.Second, fresh)
	if got := a.LastHeard(42, top.Nodes[1].Addr); !got.IsZero() {
		t.Errorf("adverts heard from the standby itself at %s: it is BACKUP and sends none", got)
	}
	if got := a.LastHeard(43, active); !got.IsZero() {
		t.Errorf("adverts heard for router id 43 at %s: none runs", got)
	}

	nft := func(stdin string, args ...string) {
		t.Helper()
		cmd := top.Nodes[1].Command(t.Context(), "nft", args...)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nft %v: %v: %s", args, err, out)
		}
	}
	nft("table inet pier_test_adverts {\n chain in { type filter hook input priority 0; ip protocol vrrp drop; }\n}\n", "-f", "-")
	time.Sleep(100 * time.Millisecond) // an advert read before the rule may still be recorded
	dropped := a.LastHeard(42, active)
	time.Sleep(600 * time.Millisecond)
	if got := a.LastHeard(42, active); !got.Equal(dropped) {
		t.Fatalf("adverts still heard with VRRP dropped by the input filter (last %s, at the drop %s)", got, dropped)
	}
	nft("", "delete", "table", "inet", "pier_test_adverts")
	waitFor(t, "the adverts heard again once the filter lets them through", 2*time.Second, fresh)
}
