//go:build linux

package addrhold

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/topo"
)

// node is one holder under test with its tick loop.
type node struct {
	h       *Holder
	healthy atomic.Bool
	served  atomic.Bool
	role    atomic.Value // model.VRRPState of vr7
	mu      sync.Mutex   // Holder methods run on one goroutine at a time
}

func (n *node) do(f func(h *Holder)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f(n.h)
}

// startNodes starts a Holder per node of top, synced to lb, each ticked
// every 50 ms the way the agent does (health and "served" from the node's
// flags, both true at start) until ctx ends; wg waits for the tickers.
func startNodes(t *testing.T, ctx context.Context, wg *sync.WaitGroup, top *topo.Topology, lb *model.LoadBalancer) []*node {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nodes := make([]*node, len(top.Nodes))
	for i, host := range top.Nodes {
		h, err := New(Config{Node: host.Name, Interface: "eth0", Dir: t.TempDir(), Netns: host.NS, Logger: logger.With("node", host.Name)})
		if err != nil {
			t.Fatal(err)
		}
		n := &node{h: h}
		// Under the node's lock: a tick may still run when cleanup starts.
		t.Cleanup(func() { n.do(func(h *Holder) { _ = h.Stop(context.Background()) }) })
		n.healthy.Store(true)
		n.served.Store(true)
		n.role.Store(model.VRRPState(""))
		nodes[i] = n
		if err := h.Sync(ctx, []*model.LoadBalancer{lb}); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				n.do(func(h *Holder) {
					roles, err := h.Tick(func(string) bool { return n.healthy.Load() }, func(uuid string) bool { return uuid != lb.UUID || n.served.Load() })
					if err != nil {
						t.Errorf("tick %s: %v", host.Name, err)
					}
					n.role.Store(roles[lb.UUID])
				})
			}
		})
	}
	return nodes
}

// TestHolderPair runs two Holders with real keepalived in two node
// namespaces and drives their gates the way the agent does: health,
// drain, a load balancer that never served. It samples the holders every
// 20 ms throughout: never two.
func TestHolderPair(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 2})
	vip := netip.MustParseAddr("10.99.1.20")
	lb := placed("lb1", "n0", "n1", 7, vip.String(), "10.99.2.20")
	lb.Placement.ActiveAddress, lb.Placement.StandbyAddress = top.Nodes[0].Addr.String(), top.Nodes[1].Addr.String()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	nodes := startNodes(t, ctx, &wg, top, lb)
	role := func(i int) model.VRRPState { return nodes[i].role.Load().(model.VRRPState) }
	var both, samples atomic.Int64
	wg.Go(func() {
		for ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond)
			samples.Add(1)
			if len(top.Holders(vip)) > 1 {
				both.Add(1)
			}
		}
	})
	wait := func(what string, limit time.Duration, want0, want1 model.VRRPState) time.Duration {
		t.Helper()
		start := time.Now()
		for role(0) != want0 || role(1) != want1 || (want0 == model.VRRPMaster) != top.Nodes[0].Has(vip) || (want1 == model.VRRPMaster) != top.Nodes[1].Has(vip) {
			if time.Since(start) > limit {
				t.Fatalf("%s: roles %s/%s, holders %v; want %s/%s within %s", what, role(0), role(1), top.Holders(vip), want0, want1, limit)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	wait("first election", 3*time.Second, model.VRRPMaster, model.VRRPBackup)

	nodes[0].healthy.Store(false)
	t.Logf("active HAProxy unhealthy → standby holds: %s", wait("failover", time.Second, model.VRRPFault, model.VRRPMaster))
	nodes[0].healthy.Store(true)
	wait("recovery without preemption", time.Second, model.VRRPBackup, model.VRRPMaster)
	time.Sleep(500 * time.Millisecond)
	wait("no flap back", 0, model.VRRPBackup, model.VRRPMaster)

	nodes[1].do(func(h *Holder) { h.SetDraining(true) })
	t.Logf("drain → the other node holds: %s", wait("drain", time.Second, model.VRRPMaster, model.VRRPFault))
	nodes[1].do(func(h *Holder) { h.SetDraining(false) })
	wait("drain ended", time.Second, model.VRRPMaster, model.VRRPBackup)

	// A load balancer that never served here does not move the others.
	nodes[0].served.Store(false)
	nodes[0].healthy.Store(false)
	time.Sleep(500 * time.Millisecond)
	wait("never served", 0, model.VRRPMaster, model.VRRPBackup)
	nodes[0].served.Store(true)
	nodes[0].healthy.Store(true)

	// The instance goes when its last load balancer leaves: no address stays.
	for _, n := range nodes {
		n.do(func(h *Holder) {
			if err := h.Sync(ctx, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(top.Holders(vip)) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h := top.Holders(vip); len(h) > 0 {
		t.Fatalf("address still held by %v after its load balancer left", h)
	}
	if b := both.Load(); b != 0 {
		t.Fatalf("two holders in %d of %d samples", b, samples.Load())
	}
	t.Logf("holders sampled %d times, never two", samples.Load())
	// keepalived followed every gate within the grace: no repair reload.
	for i, n := range nodes {
		n.do(func(h *Holder) {
			if r := h.ka.Nudges(); r != 0 {
				t.Errorf("node %d: keepalived disagreed with its gates; %d repair reloads", i, r)
			}
		})
	}
}

// TestHolderLone: the pair loses a node and the load balancer is placed on
// the survivor alone, then a standby comes back. The survivor holds the
// VIP throughout: without VRRP while alone, then through the new
// instance's election (sampled every 10 ms: the gaps are counted).
func TestHolderLone(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 2})
	vip := netip.MustParseAddr("10.99.1.30")
	pair := placed("lb1", "n0", "n1", 7, vip.String(), "")
	pair.Placement.ActiveAddress, pair.Placement.StandbyAddress = top.Nodes[0].Addr.String(), top.Nodes[1].Addr.String()
	alone := placed("lb1", "n0", "", 0, vip.String(), "")
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	nodes := startNodes(t, ctx, &wg, top, pair)
	holders := func() string { return fmt.Sprint(top.Holders(vip)) }
	waitHolders := func(want string) {
		t.Helper()
		deadline := time.Now().Add(3 * time.Second)
		for holders() != want {
			if time.Now().After(deadline) {
				t.Fatalf("holders %s, want %s", holders(), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitHolders("[n0]")
	var gaps, doubles, samples atomic.Int64
	sample, stopSample := context.WithCancel(ctx)
	wg.Go(func() {
		for sample.Err() == nil {
			switch h := holders(); h {
			case "[]":
				gaps.Add(1)
			case "[n0 n1]":
				doubles.Add(1)
			}
			samples.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	})

	// n1 dies; the controller places the load balancer on n0 alone.
	nodes[1].do(func(h *Holder) { _ = h.Stop(ctx) })
	nodes[0].do(func(h *Holder) {
		if err := h.Sync(ctx, []*model.LoadBalancer{alone}); err != nil {
			t.Fatal(err)
		}
	})
	time.Sleep(time.Second)
	if h := holders(); h != "[n0]" || nodes[0].role.Load() != model.VRRPMaster {
		t.Fatalf("alone: holders %s, role %v", h, nodes[0].role.Load())
	}
	// n1 is back as the standby: a new instance, elected again.
	for _, n := range nodes {
		n.do(func(h *Holder) {
			if err := h.Sync(ctx, []*model.LoadBalancer{pair}); err != nil {
				t.Fatal(err)
			}
		})
	}
	deadline := time.Now().Add(3 * time.Second)
	for nodes[0].role.Load() != model.VRRPMaster || nodes[1].role.Load() != model.VRRPBackup || holders() != "[n0]" {
		if time.Now().After(deadline) {
			t.Fatalf("pair again: roles %v/%v, holders %s", nodes[0].role.Load(), nodes[1].role.Load(), holders())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(releaseWait + 200*time.Millisecond) // past the handover to keepalived
	stopSample()
	if h := holders(); h != "[n0]" {
		t.Fatalf("after the handover to keepalived: holders %s", h)
	}
	t.Logf("%d samples: %d with no holder (10 ms each), %d with two", samples.Load(), gaps.Load(), doubles.Load())
	if doubles.Load() > 0 {
		t.Errorf("two holders in %d samples", doubles.Load())
	}
	if gaps.Load() > 8 {
		t.Errorf("no holder in %d samples (about %d ms)", gaps.Load(), gaps.Load()*10)
	}
}
