//go:build linux

package vrrp

import (
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/test/topo"
)

func pairConfig(dir string, top *topo.Topology, i int) Config {
	prio := PriorityActive
	if i == 1 {
		prio = PriorityStandby
	}
	return Config{Node: top.Nodes[i].Name, Dir: dir, Advert: DefaultAdvert, Instances: []Instance{{
		Name: "pair-a-b", RouterID: 42, Interface: "eth0", Priority: prio,
		Source:    top.Nodes[i].Addr,
		Peers:     []netip.Addr{top.Nodes[1-i].Addr},
		Addresses: []netip.Addr{vip},
	}}}
}

var vip = netip.MustParseAddr("10.99.1.10")

// openActiveFirst opens the active node's gate (ks[0]), waits until it
// holds, then opens the standby's, as addrhold does with a new instance:
// both BACKUP with nopreempt, whoever's master-down timer ends first
// keeps the addresses, and the priorities alone give the active node a
// head start of only 4 ms.
func openActiveFirst(t *testing.T, ks []*Keepalived, activeHolds func() bool) {
	t.Helper()
	if err := ks[0].SetHealthy("pair-a-b", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the active node takes the address", 3*time.Second, activeHolds)
	for _, k := range ks[1:] {
		if err := k.SetHealthy("pair-a-b", true); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// TestPairFailover runs two real keepalived through Keepalived and checks
// the moves pier relies on, sampling the holders every 20 ms throughout:
// never two holders while both nodes live and see each other.
func TestPairFailover(t *testing.T) {
	topo.Skip(t, "keepalived", "nft")
	top := topo.New(t, topo.Options{Nodes: 2})
	holds := func(i int) bool { return top.Nodes[i].Has(vip) }
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var ks [2]*Keepalived
	var cfgs [2]Config
	for i := range ks {
		k, err := NewKeepalived("", top.Nodes[i].NS, logger.With("node", i))
		if err != nil {
			t.Fatal(err)
		}
		ks[i], cfgs[i] = k, pairConfig(t.TempDir(), top, i)
		t.Cleanup(func() { _ = k.Stop(t.Context()) })
		if err := k.Apply(t.Context(), cfgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody holds the address before its HAProxy is said to serve.
	time.Sleep(600 * time.Millisecond)
	if holds(0) || holds(1) {
		t.Fatal("an instance held its address before SetHealthy")
	}

	var both, samples atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			samples.Add(1)
			if holds(0) && holds(1) {
				both.Add(1)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	openActiveFirst(t, ks[:], func() bool { return holds(0) })

	// HAProxy on the active node fails: FAULT sends priority 0.
	if err := ks[0].SetHealthy("pair-a-b", false); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the standby takes over after a FAULT", time.Second, func() bool { return holds(1) && !holds(0) })
	t.Logf("takeover after FAULT: %s", took)

	// Recovery does not take the address back (nopreempt: no flap).
	if err := ks[0].SetHealthy("pair-a-b", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !holds(1) || holds(0) {
		t.Fatal("the recovered node took the address back")
	}

	// keepalived itself is killed on the holder: the supervisor releases
	// the address at once and restarts it; the peer takes over.
	old := ks[1].PID()
	_ = syscall.Kill(old, syscall.SIGKILL)
	took = waitFor(t, "the peer takes over from a killed keepalived", 2*time.Second, func() bool { return holds(0) && !holds(1) })
	t.Logf("takeover after kill -9 keepalived: %s", took)
	waitFor(t, "keepalived restarted", 3*time.Second, func() bool { p := ks[1].PID(); return p != 0 && p != old })
	restarted := ks[1].PID()
	time.Sleep(time.Second)
	if p := ks[1].PID(); p != restarted {
		t.Fatalf("the restarted keepalived (pid %d) did not stay up (now %d); log:\n%s", restarted, p, readLog(cfgs[1]))
	}
	if !holds(0) || holds(1) {
		t.Fatal("after the restart the address moved again")
	}

	// A planned stop (SIGTERM) hands over at once.
	if err := ks[0].Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "the peer takes over after a stop", time.Second, func() bool { return holds(1) && !holds(0) })
	t.Logf("takeover after SIGTERM: %s", took)
	// The advert filter lives as long as keepalived.
	for i, want := range []bool{false, true} {
		err := exec.Command("ip", "netns", "exec", top.Nodes[i].NS, "nft", "list", "table", "inet", "pier_vrrp").Run()
		if (err == nil) != want {
			t.Errorf("node %d: advert filter table present %t, want %t (keepalived stopped: %t)", i, err == nil, want, !want)
		}
	}

	if b := both.Load(); b != 0 {
		t.Fatalf("two holders in %d of %d samples", b, samples.Load())
	}
	t.Logf("holders sampled %d times, never two", samples.Load())
}

func readLog(c Config) string {
	b, _ := os.ReadFile(c.logPath())
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
