package bgp

import (
	"context"
	"net/netip"
	"time"

	api "github.com/osrg/gobgp/v3/api"
	"pier.dev/pier/internal/bfd"
)

// BFD configures the speaker's BFD sessions (RFC 5880, single hop per RFC
// 5881): the peers must run BFD for the same addresses (bird: a `bfd`
// protocol and `bfd on` in the BGP protocol).
type BFD struct {
	Enabled bool
	// Interval is how often packets go each way once the session is Up
	// (0: 100 ms); Multiplier how many may be missed (0: 3). The router
	// sees the node gone Multiplier × Interval after its last packet.
	Interval   time.Duration
	Multiplier int
}

// startBFD opens the BFD sockets (in the speaker's namespace) and a
// session per peer.
func (s *Speaker) startBFD() error {
	b, err := bfd.Listen(bfd.Config{Netns: s.cfg.Netns, Logger: s.log})
	if err != nil {
		return err
	}
	s.bfd, s.bfdSessions = b, map[netip.Addr]*bfd.Session{}
	for _, p := range s.cfg.Peers {
		sess, err := b.Add(p.Address, bfd.SessionConfig{Interval: s.cfg.BFD.Interval, Multiplier: s.cfg.BFD.Multiplier,
			OnChange: s.bfdChanged})
		if err != nil {
			b.Close()
			return err
		}
		s.bfdSessions[p.Address.Unmap()] = sess
	}
	return nil
}

// bfdChanged reacts to a BFD session's change: a peer whose session left
// Up is lost, now, not at the end of the hold time. Its BGP session is
// reset (a NOTIFICATION, which a dead path may never carry, then closed)
// so it reconnects as soon as the path is back. A peer that said
// admin-down stopped its BFD on purpose: that is no failure (RFC 5882
// section 3.2), the BGP session stays.
func (s *Speaker) bfdChanged(c bfd.Change) {
	switch {
	case c.To == bfd.Up:
		s.log.Info("BFD session up", "peer", c.Peer)
	case c.From == bfd.Up && c.RemoteState == bfd.AdminDown:
		s.log.Info("BFD session down: the peer stopped its BFD on purpose; the BGP session stays", "peer", c.Peer)
	case c.From == bfd.Up:
		s.log.Warn("BGP peer lost: its BFD session went down; resetting the BGP session", "peer", c.Peer,
			"since_last_packet", c.SinceLastPacket.Round(time.Millisecond), "diag", c.Diag.String())
		// Not on the BFD session's goroutine, which keeps its timers.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := s.srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: c.Peer.String(), Communication: "BFD session down"}); err != nil {
				s.log.Warn("BGP peer lost: reset failed", "peer", c.Peer, "error", err)
			}
		}()
	}
}

// StopBFD ends the BFD sessions with admin-down, which a router must not
// take for a failure (RFC 5882 section 3.2): before an exit that leaves
// the BGP sessions to end with the process (graceful restart), or the
// router would drop the routes the moment the packets stop.
func (s *Speaker) StopBFD() {
	if s.bfd != nil {
		s.bfd.Close()
	}
}
