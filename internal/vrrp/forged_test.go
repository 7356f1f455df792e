//go:build linux

package vrrp

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/test/forge"
	"pier.dev/pier/test/topo"
)

// TestForgedAdvertsIgnored: a neighbour on the segment that is no node
// (the topology's client host) sends adverts of priority 255 for the
// pair's router id, carrying its address, unicast to both nodes, ten a
// second: from its own address, then from the standby's with TTL 64 (as
// a spoof from beyond a router arrives). The master keeps the address and
// the standby never takes it: the kernel's filter drops the adverts
// before keepalived reads them. With the filter's table deleted,
// keepalived's own checks (source, TTL) still refuse them, and say so in
// its log.
func TestForgedAdvertsIgnored(t *testing.T) {
	topo.Skip(t, "keepalived", "nft")
	top := topo.New(t, topo.Options{Nodes: 2, Client: true})
	holds := func(i int) bool { return top.Nodes[i].Has(vip) }
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var cfgs [2]Config
	var ks []*Keepalived
	for i := range cfgs {
		k, err := NewKeepalived("", top.Nodes[i].NS, logger)
		if err != nil {
			t.Fatal(err)
		}
		cfgs[i] = pairConfig(t.TempDir(), top, i)
		t.Cleanup(func() { _ = k.Stop(t.Context()) })
		if err := k.Apply(t.Context(), cfgs[i]); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	openActiveFirst(t, ks, func() bool { return holds(0) && !holds(1) })

	adv := forge.Advert{RouterID: 42, Priority: 255, Interval: DefaultAdvert, Addrs: []netip.Addr{vip}}
	both := []netip.Addr{top.Nodes[0].Addr, top.Nodes[1].Addr}
	// The standby's address, to the master: it would step down for a
	// peer of higher priority that the real standby knows nothing of.
	spoofed, offLink := []netip.Addr{top.Nodes[0].Addr}, forge.Options{From: top.Nodes[1].Addr, TTL: 64}
	attack := func(what string, d time.Duration, to []netip.Addr, opts forge.Options) {
		t.Helper()
		s, err := forge.Start(top.Client.NS, top.Client.Addr, to, adv, opts)
		if err != nil {
			t.Fatal(err)
		}
		var lost, double, samples atomic.Int64
		var wg sync.WaitGroup
		end := time.Now().Add(d)
		wg.Go(func() {
			for time.Now().Before(end) {
				samples.Add(1)
				h0, h1 := holds(0), holds(1)
				if !h0 {
					lost.Add(1)
				}
				if h1 {
					double.Add(1)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
		wg.Wait()
		sent, failed := s.Stop()
		if sent == 0 || failed > 0 {
			t.Fatalf("%s: %d forged adverts sent, %d failed", what, sent, failed)
		}
		t.Logf("%s: %d forged adverts over %s; the master lost the address in %d of %d samples, the standby held it in %d",
			what, sent, d, lost.Load(), samples.Load(), double.Load())
		if lost.Load() > 0 || double.Load() > 0 {
			t.Errorf("%s: forged adverts moved the address (lost by the master %d times, held by the standby %d times); master's log:\n%s",
				what, lost.Load(), double.Load(), readLog(cfgs[0]))
		}
	}
	refused := func(i int, what string) int { return strings.Count(readFullLog(cfgs[i]), what) }
	const notPeer, badTTL = "not a unicast peer", "TTL/HL 64 not in range"

	attack("with the kernel filter", 3*time.Second, both, forge.Options{})
	attack("with the kernel filter, the standby's address spoofed, TTL 64", 2*time.Second, spoofed, offLink)
	if n := refused(0, notPeer) + refused(1, notPeer) + refused(0, badTTL); n > 0 {
		t.Errorf("keepalived read %d forged adverts: the kernel filter let them through", n)
	}
	for i, n := range top.Nodes {
		if out, err := exec.Command("ip", "netns", "exec", n.NS, "nft", "list", "table", "inet", "pier_vrrp").CombinedOutput(); err != nil {
			t.Errorf("node %d has no advert filter: %v: %s", i, err, out)
		}
	}

	for _, n := range top.Nodes {
		if out, err := exec.Command("ip", "netns", "exec", n.NS, "nft", "delete", "table", "inet", "pier_vrrp").CombinedOutput(); err != nil {
			t.Fatalf("delete the filter: %v: %s", err, out)
		}
	}
	attack("keepalived alone (no filter table)", 2*time.Second, both, forge.Options{})
	if refused(0, notPeer) == 0 || refused(1, notPeer) == 0 {
		t.Errorf("keepalived did not say it refused the adverts from a non-peer (master %d, standby %d lines)",
			refused(0, notPeer), refused(1, notPeer))
	}
	attack("keepalived alone, the standby's address spoofed, TTL 64", 2*time.Second, spoofed, offLink)
	if refused(0, badTTL) == 0 {
		t.Errorf("keepalived did not say it refused the adverts with TTL 64")
	}
}

func readFullLog(c Config) string {
	b, _ := os.ReadFile(c.logPath())
	return string(b)
}

// TestPairIPv6Filtered: a pair that speaks VRRP over IPv6 behind the
// advert filter still hears itself: one node holds the address, the
// other stays BACKUP, for 2 s. Adverts must leave with hop limit 255
// (unicast_ttl), or the filter and keepalived's check would drop the
// peer's and both nodes would hold the address.
func TestPairIPv6Filtered(t *testing.T) {
	topo.Skip(t, "keepalived", "nft")
	top := topo.New(t, topo.Options{Nodes: 2})
	self := []netip.Addr{netip.MustParseAddr("fd00:99::11"), netip.MustParseAddr("fd00:99::12")}
	vip6 := netip.MustParseAddr("fd00:99::1:10")
	for i, n := range top.Nodes {
		if out, err := exec.Command("ip", "-n", n.NS, "addr", "add", self[i].String()+"/64", "dev", "eth0", "nodad").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add: %v: %s", err, out)
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var cfgs [2]Config
	var ks []*Keepalived
	for i := range cfgs {
		k, err := NewKeepalived("", top.Nodes[i].NS, logger)
		if err != nil {
			t.Fatal(err)
		}
		prio := PriorityActive
		if i == 1 {
			prio = PriorityStandby
		}
		cfgs[i] = Config{Node: top.Nodes[i].Name, Dir: t.TempDir(), Advert: DefaultAdvert, Instances: []Instance{{
			Name: "pair-a-b", RouterID: 42, Interface: "eth0", Priority: prio,
			Source: self[i], Peers: []netip.Addr{self[1-i]}, Addresses: []netip.Addr{vip6},
		}}}
		t.Cleanup(func() { _ = k.Stop(t.Context()) })
		if err := k.Apply(t.Context(), cfgs[i]); err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	holds := func(i int) bool { return top.Nodes[i].Has(vip6) }
	openActiveFirst(t, ks, func() bool { return holds(0) })
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !holds(0) || holds(1) {
			t.Fatalf("holders n0 %t, n1 %t: the nodes do not hear each other's IPv6 adverts; standby's log:\n%s",
				holds(0), holds(1), readLog(cfgs[1]))
		}
	}
	if strings.Contains(readFullLog(cfgs[1]), "not in range") {
		t.Errorf("keepalived refused the peer's IPv6 adverts on their hop limit")
	}
}
