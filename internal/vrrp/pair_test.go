//go:build linux

package vrrp

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// pairNet is two node namespaces and a switch namespace with a bridge,
// on 10.99.0.0/24, with no route anywhere else.
type pairNet struct {
	sw, nodes [2]string
}

func newPairNet(t *testing.T) *pairNet {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the VRRP pair test needs root")
		}
		t.Skip("needs root for network namespaces")
	}
	if _, err := exec.LookPath("keepalived"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("keepalived not installed (hack/deps.sh installs it)")
		}
		t.Skip("keepalived not installed")
	}
	id := fmt.Sprintf("pvrrp%d", os.Getpid()%100000)
	n := &pairNet{nodes: [2]string{id + "-a", id + "-b"}}
	n.sw[0] = id + "-sw"
	t.Cleanup(func() {
		for _, ns := range append(n.nodes[:], n.sw[0]) {
			if out, err := exec.Command("ip", "netns", "pids", ns).Output(); err == nil {
				for _, pid := range strings.Fields(string(out)) {
					var p int
					fmt.Sscan(pid, &p)
					_ = syscall.Kill(p, syscall.SIGKILL)
				}
			}
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	run("netns", "add", n.sw[0])
	run("-n", n.sw[0], "link", "add", "br0", "type", "bridge")
	run("-n", n.sw[0], "link", "set", "br0", "up")
	for i, ns := range n.nodes {
		run("netns", "add", ns)
		peer := fmt.Sprintf("p%d", i)
		run("-n", n.sw[0], "link", "add", peer, "type", "veth", "peer", "name", "eth0", "netns", ns)
		run("-n", n.sw[0], "link", "set", peer, "master", "br0", "up")
		run("-n", ns, "link", "set", "lo", "up")
		run("-n", ns, "link", "set", "eth0", "up")
		run("-n", ns, "addr", "add", fmt.Sprintf("10.99.0.%d/24", i+1), "dev", "eth0")
	}
	return n
}

// holds reports whether node i has addr on eth0.
func (n *pairNet) holds(i int, addr string) bool {
	out, _ := exec.Command("ip", "-n", n.nodes[i], "-o", "addr", "show", "dev", "eth0").Output()
	return strings.Contains(string(out), " "+addr+"/32 ")
}

func pairConfig(dir, node string, i int) Config {
	a := netip.MustParseAddr
	prio := PriorityActive
	if i == 1 {
		prio = PriorityStandby
	}
	return Config{Node: node, Dir: dir, Advert: DefaultAdvert, Instances: []Instance{{
		Name: "pair-a-b", RouterID: 42, Interface: "eth0", Priority: prio,
		Source:    a(fmt.Sprintf("10.99.0.%d", i+1)),
		Peers:     []netip.Addr{a(fmt.Sprintf("10.99.0.%d", 2-i))},
		Addresses: []netip.Addr{a("10.99.1.10")},
	}}}
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
	n := newPairNet(t)
	const vip = "10.99.1.10"
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var ks [2]*Keepalived
	var cfgs [2]Config
	for i := range ks {
		k, err := NewKeepalived("", n.nodes[i], logger.With("node", i))
		if err != nil {
			t.Fatal(err)
		}
		ks[i], cfgs[i] = k, pairConfig(t.TempDir(), fmt.Sprintf("node-%c", 'a'+i), i)
		t.Cleanup(func() { _ = k.Stop(t.Context()) })
		if err := k.Apply(t.Context(), cfgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Nobody holds the address before its HAProxy is said to serve.
	time.Sleep(600 * time.Millisecond)
	if n.holds(0, vip) || n.holds(1, vip) {
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
			if n.holds(0, vip) && n.holds(1, vip) {
				both.Add(1)
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	for i := range ks {
		if err := ks[i].SetHealthy("pair-a-b", true); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the active node takes the address", 3*time.Second, func() bool { return n.holds(0, vip) })

	// HAProxy on the active node fails: FAULT sends priority 0.
	if err := ks[0].SetHealthy("pair-a-b", false); err != nil {
		t.Fatal(err)
	}
	took := waitFor(t, "the standby takes over after a FAULT", time.Second, func() bool { return n.holds(1, vip) && !n.holds(0, vip) })
	t.Logf("takeover after FAULT: %s", took)

	// Recovery does not take the address back (nopreempt: no flap).
	if err := ks[0].SetHealthy("pair-a-b", true); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if !n.holds(1, vip) || n.holds(0, vip) {
		t.Fatal("the recovered node took the address back")
	}

	// keepalived itself is killed on the holder: the supervisor releases
	// the address at once and restarts it; the peer takes over.
	old := ks[1].PID()
	_ = syscall.Kill(old, syscall.SIGKILL)
	took = waitFor(t, "the peer takes over from a killed keepalived", 2*time.Second, func() bool { return n.holds(0, vip) && !n.holds(1, vip) })
	t.Logf("takeover after kill -9 keepalived: %s", took)
	waitFor(t, "keepalived restarted", 3*time.Second, func() bool { p := ks[1].PID(); return p != 0 && p != old })
	restarted := ks[1].PID()
	time.Sleep(time.Second)
	if p := ks[1].PID(); p != restarted {
		t.Fatalf("the restarted keepalived (pid %d) did not stay up (now %d); log:\n%s", restarted, p, readLog(cfgs[1]))
	}
	if !n.holds(0, vip) || n.holds(1, vip) {
		t.Fatal("after the restart the address moved again")
	}

	// A planned stop (SIGTERM) hands over at once.
	if err := ks[0].Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	took = waitFor(t, "the peer takes over after a stop", time.Second, func() bool { return n.holds(1, vip) && !n.holds(0, vip) })
	t.Logf("takeover after SIGTERM: %s", took)

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
