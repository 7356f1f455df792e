//go:build linux

package addrhold

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"testing"

	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/mover/movertest"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/topo"
)

// TestMoverContract runs the mover contract against keepalived in a node
// namespace. The load balancers' standby node, n1, is not there: the
// node under test is elected MASTER once no advert came for the master
// down interval, as when its peer is down.
func TestMoverContract(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 1})
	n0 := top.Nodes[0]
	// Warnings left out: without the peer, the handoff table waits for a
	// MAC address that never comes, and says so.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	movertest.Run(t, movertest.Harness{
		New: func(t *testing.T) mover.Mover {
			m, err := NewMover(Config{Node: "n0", Interface: "eth0", Dir: t.TempDir(), Netns: n0.NS, Logger: logger}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.h.Stop(context.Background()) })
			return m
		},
		LB: func(_ *testing.T, n int) *model.LoadBalancer {
			return placed(fmt.Sprintf("%08d-0000-4000-8000-000000000000", n), "n0", "n1", 9,
				fmt.Sprintf("10.99.1.%d", 20+n), fmt.Sprintf("10.99.2.%d", 20+n))
		},
		Attracts: func(_ *testing.T, lb *model.LoadBalancer) bool {
			return n0.Has(netip.MustParseAddr(lb.VIP)) && n0.Has(netip.MustParseAddr(lb.FIP))
		},
	})
}
