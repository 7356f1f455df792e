//go:build linux

package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"testing"

	api "github.com/osrg/gobgp/v3/api"
	"github.com/osrg/gobgp/v3/pkg/server"

	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/mover/movertest"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/testport"
	"pier.dev/pier/test/topo"
)

// TestMoverContract runs the mover contract against a router: GoBGP in
// this process, on loopback, a fresh one per mover, peered with the
// mover's speaker. A load balancer's addresses are attracted while the
// router has a route to them. The local routes go to a node namespace.
func TestMoverContract(t *testing.T) { moverContract(t, false) }

// TestMoverContractECMP runs the contract against the ECMP mode: load
// balancers placed on three nodes at once, advertised with the active
// node's preference from this one, whose Role says ecmp.
func TestMoverContractECMP(t *testing.T) { moverContract(t, true) }

func moverContract(t *testing.T, ecmp bool) {
	top := topo.New(t, topo.Options{Nodes: 1})
	n0 := top.Nodes[0]
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var router *server.BgpServer
	movertest.Run(t, movertest.Harness{
		New: func(t *testing.T) mover.Mover {
			port := testport.Get(t)
			router = startRouter(t, port, logger)
			m := NewMover(MoverConfig{Node: "n0", Netns: n0.NS, ECMP: ecmp, Logger: logger, Speaker: Config{ASN: 64512,
				RouterID: n0.Addr, Peers: []Peer{{Address: netip.MustParseAddr("127.0.0.1"), ASN: 64512, Port: uint16(port)}}}})
			t.Cleanup(func() {
				if m.speaker != nil {
					m.speaker.Stop(context.Background()) // what a Close(false) leaves, the process's exit ends
				}
			})
			return m
		},
		LB: func(_ *testing.T, n int) *model.LoadBalancer {
			lb := &model.LoadBalancer{UUID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", n),
				VIP: fmt.Sprintf("10.99.1.%d", 20+n), FIP: fmt.Sprintf("10.99.2.%d", 20+n),
				Placement: model.Placement{Active: "n0", Standby: "n1"}}
			if ecmp {
				lb.Provider = model.ProviderNative
				lb.Placement.ECMP = []string{"n0", "n1", "n2"}
			}
			return lb
		},
		Attracts: func(t *testing.T, lb *model.LoadBalancer) bool {
			return routed(t, router, lb.VIP, n0.Addr) && routed(t, router, lb.FIP, n0.Addr)
		},
		Role: func(t *testing.T, m mover.Mover, lb *model.LoadBalancer) {
			want := model.BGPPreferred
			if ecmp {
				want = model.BGPECMP
			}
			if got := m.Role(lb.UUID).BGP; got != want {
				t.Errorf("role of an advertised load balancer %q, want %q", got, want)
			}
		},
	})
}

// startRouter runs a GoBGP router in this process that listens on
// 127.0.0.1:port for the speaker of AS 64512 and stops when t ends.
func startRouter(t *testing.T, port int, logger *slog.Logger) *server.BgpServer {
	t.Helper()
	srv := server.NewBgpServer(server.LoggerOption(newLogger(logger)))
	go srv.Serve()
	t.Cleanup(srv.Stop)
	ctx := context.Background()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: 64512, RouterId: "10.99.0.1",
		ListenPort: int32(port), ListenAddresses: []string{"127.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 64512},
		Transport: &api.Transport{PassiveMode: true},
	}}); err != nil {
		t.Fatal(err)
	}
	return srv
}

// routed reports whether the router has a route to addr through via.
func routed(t *testing.T, router *server.BgpServer, addr string, via netip.Addr) bool {
	found := false
	err := router.ListPath(context.Background(), &api.ListPathRequest{TableType: api.TableType_GLOBAL,
		Family:   familyOf(netip.MustParseAddr(addr)),
		Prefixes: []*api.TableLookupPrefix{{Prefix: addr + "/32"}}}, func(d *api.Destination) {
		for _, p := range d.Paths {
			if !p.IsWithdraw && nextHop(p) == via {
				found = true
			}
		}
	})
	if err != nil {
		t.Logf("router: %v", err)
	}
	return found
}

func nextHop(p *api.Path) netip.Addr {
	for _, a := range p.Pattrs {
		var nh api.NextHopAttribute
		if a.UnmarshalTo(&nh) == nil {
			if addr, err := netip.ParseAddr(nh.NextHop); err == nil {
				return addr
			}
		}
	}
	return netip.Addr{}
}
