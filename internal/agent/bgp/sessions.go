package bgp

import (
	"context"
	"fmt"
	"time"

	api "github.com/osrg/gobgp/v3/api"
)

// GoBGP holds a peer whose session ended in IDLE for a fixed 5 s (its
// holdtimeIdle; IdleHoldTimeAfterReset applies to an administrative reset
// only) and then waits its connect-retry (1–2 s with connectRetry, GoBGP
// adds up to one more as jitter) before it dials: a router that restarts
// had none of this node's routes for 6–7 s after the session ended
// (test/ecmp TestRouterRestartECMP). A peer just added has no idle hold,
// so the speaker replaces the peer of a session that ended with a new
// one of the same configuration, which dials after connectRetry.
//
// A router whose sessions flap is damped as GoBGP would: a peer replaced
// less than reconnectDamping ago keeps GoBGP's idle hold, so a session
// that ends as soon as it is up is tried again every 6–7 s, as without
// the replacement, not every 1–2 s.
const reconnectDamping = 10 * time.Second

// watchSessions follows the sessions' states and replaces the peer of
// every session that leaves ESTABLISHED, until Stop.
func (s *Speaker) watchSessions() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.stopWatch = cancel
	lost := make(chan string, len(s.cfg.Peers))
	prev := map[string]api.PeerState_SessionState{} // the watch calls back on one goroutine
	err := s.srv.WatchEvent(ctx, &api.WatchEventRequest{Peer: &api.WatchEventRequest_Peer{}}, func(r *api.WatchEventResponse) {
		ev := r.GetPeer()
		if ev == nil || ev.GetType() != api.WatchEventResponse_PeerEvent_STATE {
			return
		}
		addr, state := ev.GetPeer().GetState().GetNeighborAddress(), ev.GetPeer().GetState().GetSessionState()
		was := prev[addr]
		prev[addr] = state
		if was == api.PeerState_ESTABLISHED && state != api.PeerState_ESTABLISHED {
			select {
			case lost <- addr:
			default: // one replacement queued for it already
			}
		}
	})
	if err != nil {
		cancel()
		return fmt.Errorf("watch BGP sessions: %w", err)
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case addr := <-lost:
				s.replacePeer(ctx, addr)
			}
		}
	}()
	return nil
}

// replacePeer deletes the peer at addr and adds it again, unless it was
// replaced less than reconnectDamping ago. Adding is retried every
// connectRetry: a speaker without the peer would never speak to that
// router again.
func (s *Speaker) replacePeer(ctx context.Context, addr string) {
	var peer *Peer
	for i := range s.cfg.Peers {
		if s.cfg.Peers[i].Address.String() == addr {
			peer = &s.cfg.Peers[i]
		}
	}
	s.mu.Lock()
	last, ok := s.replaced[addr]
	damped := ok && time.Since(last) < reconnectDamping
	if peer != nil && !damped {
		s.replaced[addr] = time.Now()
	}
	s.mu.Unlock()
	if damped {
		s.log.Info("bgp: session lost again soon after the last; reconnecting after GoBGP's idle hold (5 s), as for a flapping router",
			"peer", addr, "since_last", time.Since(last).Round(time.Millisecond).String())
	}
	if peer == nil || damped {
		return
	}
	if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr}); err != nil {
		s.log.Warn("bgp: the peer of a lost session not replaced; GoBGP reconnects after its idle hold (5 s)", "peer", addr, "error", err)
		return
	}
	for {
		err := s.srv.AddPeer(ctx, s.peerRequest(*peer, false))
		if err == nil {
			s.log.Debug("bgp: peer replaced, to reconnect without GoBGP's idle hold", "peer", addr)
			return
		}
		s.log.Error("bgp: the peer of a lost session could not be added again; retrying", "peer", addr, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(connectRetry):
		}
	}
}
