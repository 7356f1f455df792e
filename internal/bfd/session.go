package bfd

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Session is one neighbour's session.
type Session struct {
	srv  *Server
	peer netip.Addr
	cfg  SessionConfig
	conn *net.UDPConn
	rand *rand.Rand // the session goroutine's only

	mu      sync.Mutex
	m       *machine
	pending []Change // to report, from the session goroutine
	stats   Stats
	kick    chan struct{}
	done    chan struct{} // closed by Close: run returns
	stopped chan struct{} // closed by run as it returns
	once    sync.Once
}

// Stats count a session's packets.
type Stats struct {
	Sent, Received, Dropped uint64
	// LastDrop says why the last packet was dropped.
	LastDrop string
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) }

// discriminator picks a random non-zero local discriminator, unique among
// the server's sessions.
func (sess *Session) discriminator() uint32 {
	for {
		d := rand.Uint32()
		if d == 0 {
			continue
		}
		sess.srv.mu.Lock()
		taken := false
		for _, o := range sess.srv.byPeer {
			if o.m.localDisc == d {
				taken = true
			}
		}
		sess.srv.mu.Unlock()
		if !taken {
			return d
		}
	}
}

// State is the session's state.
func (sess *Session) State() State {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.m.state
}

// Stats returns the session's counters.
func (sess *Session) Stats() Stats {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.stats
}

// Peer is the neighbour's address.
func (sess *Session) Peer() netip.Addr { return sess.peer }

func (sess *Session) drop(why string, ttl int) {
	sess.mu.Lock()
	sess.stats.Dropped++
	first := sess.stats.LastDrop != why
	sess.stats.LastDrop = why
	sess.mu.Unlock()
	if first {
		sess.srv.logger.Warn("BFD: packet dropped", "peer", sess.peer, "reason", why, "ttl", ttl)
	}
}

func (sess *Session) receive(p Packet) {
	now := time.Now()
	sess.mu.Lock()
	from := sess.m.state
	since := sess.since(now)
	taken, changed := sess.m.receive(p, now)
	if !taken {
		sess.stats.Dropped++
		sess.stats.LastDrop = "your discriminator is not this session's"
	} else {
		sess.stats.Received++
	}
	if changed {
		sess.pending = append(sess.pending, Change{Peer: sess.peer, From: from, To: sess.m.state, Diag: sess.m.diag,
			RemoteState: sess.m.remoteState, SinceLastPacket: since})
	}
	sess.mu.Unlock()
	if taken {
		select {
		case sess.kick <- struct{}{}:
		default:
		}
	}
}

// since is how long ago the last packet came, 0 if none; sess.mu held.
func (sess *Session) since(now time.Time) time.Duration {
	if sess.m.lastRx.IsZero() {
		return 0
	}
	return now.Sub(sess.m.lastRx)
}

// run sends the periodic packets, times the session out and reports its
// changes.
func (sess *Session) run() {
	defer sess.srv.wg.Done()
	defer close(sess.stopped)
	timer := time.NewTimer(0)
	defer timer.Stop()
	// nextTx is when the next periodic packet is due; zero: none (the
	// neighbour asked for no periodic packets).
	var nextTx time.Time
	first := true
	lastState := Down
	for {
		now := time.Now()
		sess.mu.Lock()
		from := sess.m.state
		since := sess.since(now)
		if sess.m.expire(now) {
			sess.pending = append(sess.pending, Change{Peer: sess.peer, From: from, To: sess.m.state, Diag: sess.m.diag,
				RemoteState: sess.m.remoteState, SinceLastPacket: since})
		}
		// A change of state or a poll to answer goes out at once; the
		// rest on the jittered period.
		due := !nextTx.IsZero() && !now.Before(nextTx)
		send := first || due || sess.m.sendFinal || sess.m.state != lastState
		first, lastState = false, sess.m.state
		var pkt []byte
		interval := sess.m.txInterval()
		if send {
			pkt = sess.m.packet().Marshal()
			sess.stats.Sent++
			nextTx = time.Time{}
			if interval > 0 {
				nextTx = now.Add(sess.m.jitter(interval, sess.rand))
			}
		} else if interval > 0 && (nextTx.IsZero() || nextTx.Sub(now) > interval) {
			// The neighbour lowered its minimum (or asked for packets
			// again): do not wait out the old period.
			nextTx = now.Add(sess.m.jitter(interval, sess.rand))
		} else if interval == 0 {
			nextTx = time.Time{}
		}
		wake := nextTx
		if d := sess.m.detectAt; !d.IsZero() && (wake.IsZero() || d.Before(wake)) {
			wake = d
		}
		changes := sess.pending
		sess.pending = nil
		sess.mu.Unlock()
		if pkt != nil {
			if _, err := sess.conn.Write(pkt); err != nil {
				// The neighbour unreachable (ICMP, no route): the
				// detection time says what that means; nothing to do.
				sess.srv.logger.Debug("BFD: send", "peer", sess.peer, "error", err)
			}
		}
		for _, c := range changes {
			if sess.cfg.OnChange != nil {
				sess.cfg.OnChange(c)
			}
		}
		wait := time.Hour
		if !wake.IsZero() {
			wait = max(time.Until(wake), 0)
		}
		timer.Reset(wait)
		select {
		case <-sess.done:
			return
		case <-sess.kick:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// Close ends the session: it tells the neighbour admin-down (which must
// not take it for a failure, RFC 5882 section 3.2) and stops. It waits
// for the session's goroutine, so OnChange must not call it.
func (sess *Session) Close() {
	sess.once.Do(func() {
		sess.srv.remove(sess)
		close(sess.done)
		<-sess.stopped // no periodic packet after the admin-down ones
		sess.mu.Lock()
		sess.m.adminDown()
		pkt := sess.m.packet().Marshal()
		sess.mu.Unlock()
		// A few times, a packet may be lost; the neighbour's detection
		// time says Down anyway if all are.
		for range 3 {
			_, _ = sess.conn.Write(pkt)
		}
		_ = sess.conn.Close()
	})
}
