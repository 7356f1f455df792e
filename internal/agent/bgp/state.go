package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v3/api"
)

// PeerState is one session as the speaker sees it.
type PeerState struct {
	Address     string
	State       string // "established", "active", "connect", …
	Established bool
	// Received is how many routes the peer sent that it has not
	// withdrawn, kept before policy and all rejected (MaxPrefixes
	// counts them, per family).
	Received uint64
	// BFD is the state of the peer's BFD session ("up", "down", …; ""
	// without BFD).
	BFD string
}

// Peers reports the state of every session.
func (s *Speaker) Peers(ctx context.Context) ([]PeerState, error) {
	var out []PeerState
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
		st := p.GetState().GetSessionState()
		ps := PeerState{Address: p.GetConf().GetNeighborAddress(), State: sessionName(st),
			Established: st == api.PeerState_ESTABLISHED}
		for _, af := range p.GetAfiSafis() {
			ps.Received += af.GetState().GetReceived()
		}
		if a, err := netip.ParseAddr(ps.Address); err == nil && s.bfdSessions[a.Unmap()] != nil {
			ps.BFD = s.bfdSessions[a.Unmap()].State().String()
		}
		out = append(out, ps)
	})
	slices.SortFunc(out, func(a, b PeerState) int {
		switch {
		case a.Address < b.Address:
			return -1
		case a.Address > b.Address:
			return 1
		}
		return 0
	})
	return out, err
}

// Learned counts the paths in the speaker's RIB that came from a peer:
// none while the import policy holds, whatever the routers send.
func (s *Speaker) Learned(ctx context.Context) (int, error) {
	peers := map[string]bool{}
	for _, p := range s.cfg.Peers {
		peers[p.Address.String()] = true
	}
	n := 0
	for _, family := range []netip.Addr{netip.IPv4Unspecified(), netip.IPv6Unspecified()} {
		err := s.srv.ListPath(ctx, &api.ListPathRequest{TableType: api.TableType_GLOBAL, Family: familyOf(family)},
			func(d *api.Destination) {
				for _, p := range d.GetPaths() {
					if peers[p.GetNeighborIp()] {
						n++
					}
				}
			})
		if err != nil {
			return 0, fmt.Errorf("list BGP paths: %w", err)
		}
	}
	return n, nil
}

func sessionName(st api.PeerState_SessionState) string {
	switch st {
	case api.PeerState_IDLE:
		return "idle"
	case api.PeerState_CONNECT:
		return "connect"
	case api.PeerState_ACTIVE:
		return "active"
	case api.PeerState_OPENSENT:
		return "opensent"
	case api.PeerState_OPENCONFIRM:
		return "openconfirm"
	case api.PeerState_ESTABLISHED:
		return "established"
	}
	return "unknown"
}
