//go:build linux

package addrhold

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/topo"
)

// agentEnv carries a helper agent's configuration (helperAgent) from the
// test that starts it.
const agentEnv = "PIER_ADDRHOLD_AGENT"

type helperAgent struct {
	Dir, Netns string
	LBs        []*model.LoadBalancer
}

func TestMain(m *testing.M) {
	if env := os.Getenv(agentEnv); env != "" {
		os.Exit(runHelperAgent(env))
	}
	os.Exit(m.Run())
}

// runHelperAgent is an agent in a process of its own, so that a test can
// kill it with SIGKILL: a Holder synced to the load balancers, ticked
// every 50 ms, every data plane healthy. It prints "held" once the
// interface has every address, and runs until killed.
func runHelperAgent(env string) int {
	var cfg helperAgent
	if err := json.Unmarshal([]byte(env), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("agent", "first")
	h, err := New(Config{Node: "n0", Interface: "eth0", Dir: cfg.Dir, Netns: cfg.Netns, Logger: logger})
	if err == nil {
		err = h.Sync(context.Background(), cfg.LBs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	said := false
	yes := func(string) bool { return true }
	for range time.Tick(50 * time.Millisecond) {
		if _, err := h.Tick(yes, yes); err != nil {
			logger.Warn("tick", "error", err)
		}
		held, _ := netnsdo.Addresses(cfg.Netns, "eth0")
		all := true
		for _, lb := range cfg.LBs {
			for _, a := range lbAddrs(lb) {
				all = all && held[a]
			}
		}
		if all && !said {
			fmt.Println("held")
			said = true
		}
	}
	return 0
}

// syncBuffer is a log sink the ticking goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestOrphanSweepAfterRestart: an agent holds, with real keepalived in a
// node namespace, the addresses of two load balancers sharing a floating
// IP. The agent is killed (SIGKILL), then keepalived (parent and child,
// SIGKILL): the addresses stay on the interface with nobody to remove
// them. One load balancer is deleted meanwhile, and the other is placed on
// this node alone. The next agent removes the deleted one's VIP, and
// nothing else, within orphanGrace plus a tick of its first Sync: it logs
// the removal with the load balancer, and the metric says 1. The
// interface is sampled every 10 ms: the addresses still wanted (the kept
// load balancer's VIP, the shared floating IP) and one an operator added
// (never on the record) are never missing.
func TestOrphanSweepAfterRestart(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 1})
	n0 := top.Nodes[0]
	var (
		orphan   = netip.MustParseAddr("10.99.1.40")
		keptVIP  = netip.MustParseAddr("10.99.1.41")
		shared   = netip.MustParseAddr("10.99.2.40")
		operator = netip.MustParseAddr("10.99.1.99")
	)
	if err := netnsdo.AddAddress(n0.NS, "eth0", operator); err != nil {
		t.Fatal(err)
	}
	// The pair's standby (n1, 10.99.0.12) is not there: n0 becomes MASTER
	// after the master-down time.
	gone := placed("lb-gone", "n0", "n1", 7, orphan.String(), shared.String())
	kept := placed("lb-kept", "n0", "n1", 7, keptVIP.String(), shared.String())
	gone.Name, kept.Name = "ns/gone", "ns/kept"
	for _, lb := range []*model.LoadBalancer{gone, kept} {
		lb.Placement.ActiveAddress = n0.Addr.String()
	}
	dir := t.TempDir()

	// The first agent, in a process of its own.
	env, _ := json.Marshal(helperAgent{Dir: dir, Netns: n0.NS, LBs: []*model.LoadBalancer{gone, kept}})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), agentEnv+"="+string(env))
	var agentLog syncBuffer
	cmd.Stderr = &agentLog
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	heldc := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		heldc <- s.Scan() && s.Text() == "held"
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case ok := <-heldc:
		if !ok {
			t.Fatalf("first agent ended before holding the addresses:\n%s", agentLog.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("first agent does not hold the addresses after 10 s:\n%s", agentLog.String())
	}
	rec, err := os.ReadFile(filepath.Join(dir, heldFile))
	if err != nil || !strings.Contains(string(rec), `"10.99.1.40"`) || !strings.Contains(string(rec), "lb-gone") {
		t.Fatalf("the first agent's record: %q, %v", rec, err)
	}

	// The agent dies, then keepalived.
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	ka := lab.PidsIn(n0.NS, "keepalived")
	if len(ka) == 0 {
		t.Fatal("no keepalived in the node namespace")
	}
	// Stopped first, all of them, then killed: killed one by one, the
	// VRRP child could get its parent-death SIGTERM before its own
	// SIGKILL and remove its addresses gracefully, and the test would
	// prove nothing (seen once in CI).
	for _, pid := range ka {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range ka {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for deadline := time.Now().Add(3 * time.Second); len(lab.PidsIn(n0.NS, "keepalived")) > 0; {
		if time.Now().After(deadline) {
			t.Fatalf("keepalived still runs after SIGKILL: %v", lab.PidsIn(n0.NS, "keepalived"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // nothing left to remove them
	for _, a := range []netip.Addr{orphan, keptVIP, shared, operator} {
		if !n0.Has(a) {
			t.Fatalf("%s gone with keepalived's SIGKILL: the test would prove nothing", a)
		}
	}

	// The next agent: lb-gone deleted, lb-kept placed on n0 alone.
	alone := placed("lb-kept", "n0", "", 0, keptVIP.String(), shared.String())
	alone.Name = "ns/kept"
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(&logs, os.Stderr), &slog.HandlerOptions{Level: slog.LevelInfo}))
	m := metrics.New()
	h, err := New(Config{Node: "n0", Interface: "eth0", Dir: dir, Netns: n0.NS, Metrics: m, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	start := time.Now()
	if err := h.Sync(t.Context(), []*model.LoadBalancer{alone}); err != nil {
		t.Fatal(err)
	}
	var removedAt time.Duration
	var missing []string
	yes := func(string) bool { return true }
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	sample := time.NewTicker(10 * time.Millisecond)
	defer sample.Stop()
	limit := orphanGrace + 2*time.Second
	for time.Since(start) < limit && (removedAt == 0 || time.Since(start) < removedAt+time.Second) {
		select {
		case <-tick.C:
			if _, err := h.Tick(yes, yes); err != nil {
				t.Errorf("tick: %v", err)
			}
		case <-sample.C:
			held, err := netnsdo.Addresses(n0.NS, "eth0")
			if err != nil {
				t.Fatal(err)
			}
			if removedAt == 0 && !held[orphan] {
				removedAt = time.Since(start)
			}
			for _, a := range []netip.Addr{keptVIP, shared, operator} {
				if !held[a] {
					missing = append(missing, fmt.Sprintf("%s at %s", a, time.Since(start).Round(time.Millisecond)))
				}
			}
		}
	}
	if removedAt == 0 {
		t.Fatalf("orphan %s still on the interface %s after the next agent's first Sync", orphan, limit)
	}
	t.Logf("orphan removed %s after the next agent's first Sync (grace %s, tick 50 ms)", removedAt.Round(time.Millisecond), orphanGrace)
	if removedAt < orphanGrace {
		t.Errorf("orphan removed after %s, before the grace %s", removedAt, orphanGrace)
	}
	// A tick, and the sampling's own 10 ms, on a loaded machine.
	if removedAt > orphanGrace+150*time.Millisecond {
		t.Errorf("orphan removed after %s, want within the grace %s plus a tick", removedAt, orphanGrace)
	}
	if len(missing) > 0 {
		t.Errorf("addresses still wanted or never recorded went missing: %v", missing)
	}
	if got := testutil.ToFloat64(m.OrphansRemoved); got != 1 {
		t.Errorf("pier_orphan_addresses_removed_total = %v, want 1", got)
	}
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, "removed an orphaned address") {
			if line != "" {
				t.Errorf("a second removal logged: %s", l)
			}
			line = l
		}
	}
	for _, want := range []string{"level=INFO", "address=10.99.1.40", "uuid=lb-gone", "lb=ns/gone", "interface=eth0", "reason="} {
		if !strings.Contains(line, want) {
			t.Errorf("removal log %q lacks %s", line, want)
		}
	}
	rec, _ = os.ReadFile(filepath.Join(dir, heldFile))
	if strings.Contains(string(rec), `"10.99.1.40"`) || !strings.Contains(string(rec), `"10.99.1.41"`) || !strings.Contains(string(rec), `"10.99.2.40"`) ||
		strings.Contains(string(rec), `"10.99.1.99"`) {
		t.Errorf("record after the sweep:\n%s", rec)
	}
}

// TestOrphanSweepSparesPair: the sweep leaves alone what a live pair
// holds. Two holders with real keepalived carry two load balancers sharing
// a floating IP; the active node's HAProxy fails, so the standby holds
// them; then one load balancer is deleted. For orphanGrace and a second
// more, sampled every 10 ms, the standby keeps the kept load balancer's
// VIP and the shared floating IP without a gap, the deleted one's VIP is
// gone (keepalived's reload dropped it), and neither node's sweep removed
// anything.
func TestOrphanSweepSparesPair(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 2})
	var (
		deleted = netip.MustParseAddr("10.99.1.50")
		keptVIP = netip.MustParseAddr("10.99.1.51")
		shared  = netip.MustParseAddr("10.99.2.50")
	)
	gone := placed("lb-gone", "n0", "n1", 7, deleted.String(), shared.String())
	kept := placed("lb-kept", "n0", "n1", 7, keptVIP.String(), shared.String())
	for _, lb := range []*model.LoadBalancer{gone, kept} {
		lb.Placement.ActiveAddress, lb.Placement.StandbyAddress = top.Nodes[0].Addr.String(), top.Nodes[1].Addr.String()
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	nodes := startNodes(t, ctx, &wg, top, gone)
	syncAll := func(lbs ...*model.LoadBalancer) {
		for _, n := range nodes {
			n.do(func(h *Holder) {
				if err := h.Sync(ctx, lbs); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	syncAll(gone, kept)
	waitHolders := func(what, want string, addrs ...netip.Addr) {
		t.Helper()
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			ok := true
			for _, a := range addrs {
				ok = ok && fmt.Sprint(top.Holders(a)) == want
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: holders of %v are not %s", what, addrs, want)
			}
		}
	}
	waitHolders("first election", "[n0]", deleted, keptVIP, shared)
	nodes[0].healthy.Store(false)
	waitHolders("failover", "[n1]", deleted, keptVIP, shared)

	syncAll(kept)
	start := time.Now()
	waitHolders("the deleted load balancer's VIP released by keepalived", "[]", deleted)
	var gaps []string
	for time.Since(start) < orphanGrace+time.Second {
		for _, a := range []netip.Addr{keptVIP, shared} {
			if h := fmt.Sprint(top.Holders(a)); h != "[n1]" {
				gaps = append(gaps, fmt.Sprintf("%s held by %s at %s", a, h, time.Since(start).Round(time.Millisecond)))
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(gaps) > 0 {
		t.Errorf("the kept addresses moved or went: %v", gaps)
	}
	if h := top.Holders(deleted); len(h) > 0 {
		t.Errorf("deleted load balancer's VIP held by %v", h)
	}
	for i, n := range nodes {
		n.do(func(h *Holder) {
			if r := h.OrphansRemoved(); r != 0 {
				t.Errorf("node %d: the sweep removed %d addresses from a live pair", i, r)
			}
		})
	}
}
