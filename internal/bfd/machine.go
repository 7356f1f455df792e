package bfd

import (
	"math/rand/v2"
	"time"
)

// SlowInterval is the transmit interval while a session is not Up (RFC
// 5880 section 6.8.3: at least one second), so that a neighbour that is
// not there costs one packet a second.
const SlowInterval = time.Second

// machine is one session's state variables (RFC 5880 section 6.8.1) and
// its reactions to packets and to time, with no I/O and no clock of its
// own: the caller passes the time in, so a test drives it packet by packet.
type machine struct {
	state       State
	remoteState State
	localDisc   uint32
	remoteDisc  uint32
	diag        Diag
	// interval is what this side wants once Up, both ways: its
	// DesiredMinTxInterval and its RequiredMinRxInterval.
	interval time.Duration
	mult     uint8
	// What the neighbour last said.
	remoteMinRx     time.Duration
	remoteDesiredTx time.Duration
	remoteMult      uint8
	// polling: a Poll Sequence is under way (the advertised transmit
	// interval changed), every packet carries P until one with F comes.
	polling bool
	// sendFinal: the neighbour polled; the next packet, at once, has F.
	sendFinal bool
	lastRx    time.Time
	// detectAt is when the session times out without a packet; zero when
	// no detection timer runs (admin-down, or already timed out).
	detectAt time.Time
}

func newMachine(localDisc uint32, interval time.Duration, mult uint8) *machine {
	return &machine{state: Down, remoteState: Down, localDisc: localDisc, interval: interval, mult: mult,
		// RFC 5880 section 6.8.1: bfd.RemoteMinRxInterval starts at 1 µs,
		// so that the first packets go out before the neighbour spoke.
		remoteMinRx: time.Microsecond}
}

// advertisedTx is the Desired Min TX Interval this side sends: the slow
// second until Up.
func (m *machine) advertisedTx() time.Duration {
	if m.state == Up {
		return m.interval
	}
	return max(m.interval, SlowInterval)
}

// txInterval is the agreed transmit interval, before jitter: the larger of
// what this side wants and what the neighbour accepts (section 6.8.7).
// 0: the neighbour asked for no periodic packets.
func (m *machine) txInterval() time.Duration {
	if m.remoteMinRx == 0 {
		return 0
	}
	return max(m.advertisedTx(), m.remoteMinRx)
}

// detectTime is how long this side waits for a packet (section 6.8.4):
// the neighbour's multiplier times its agreed transmit interval.
func (m *machine) detectTime() time.Duration {
	return time.Duration(m.remoteMult) * max(m.interval, m.remoteDesiredTx)
}

// jitter returns the wait before the next periodic packet: 75 to 100 % of
// interval, at most 90 % when the multiplier is 1 (section 6.8.7).
func (m *machine) jitter(interval time.Duration, r *rand.Rand) time.Duration {
	top := 0.25
	if m.mult == 1 {
		top = 0.15
	}
	return time.Duration(float64(interval) * (0.75 + top*r.Float64()))
}

// receive applies a packet that passed Parse and came from the session's
// neighbour (section 6.8.6). It reports whether the packet was taken
// (a wrong Your Discriminator is not) and whether the state changed.
func (m *machine) receive(p Packet, now time.Time) (taken, changed bool) {
	if p.YourDisc != 0 && p.YourDisc != m.localDisc {
		return false, false
	}
	if m.state == AdminDown {
		return false, false
	}
	m.remoteDisc, m.remoteState = p.MyDisc, p.State
	m.remoteMinRx, m.remoteDesiredTx, m.remoteMult = p.RequiredMinRx, p.DesiredMinTx, p.DetectMult
	if p.Final && m.polling {
		m.polling = false
	}
	m.lastRx = now
	old := m.state
	switch {
	case p.State == AdminDown:
		if m.state != Down {
			m.down(DiagNeighborDown)
		}
	case m.state == Down:
		switch p.State {
		case Down:
			m.state = Init
		case Init:
			m.up()
		}
	case m.state == Init:
		if p.State == Init || p.State == Up {
			m.up()
		}
	case m.state == Up:
		if p.State == Down {
			m.down(DiagNeighborDown)
		}
	}
	if p.Poll {
		m.sendFinal = true
	}
	m.detectAt = now.Add(m.detectTime())
	return true, m.state != old
}

func (m *machine) up() {
	m.state = Up
	m.diag = DiagNone
	// The advertised transmit interval drops from the slow second to the
	// configured one: a change of timers is announced with a Poll
	// Sequence (section 6.8.3).
	if m.interval < SlowInterval {
		m.polling = true
	}
}

func (m *machine) down(d Diag) {
	m.state, m.diag = Down, d
	// Back to the slow second; no poll is needed outside Up.
	m.polling = false
}

// expire applies the passing of time: past the detection time without a
// packet, an Init or Up session goes Down and the neighbour is
// forgotten (section 6.8.4). It reports whether the state changed.
func (m *machine) expire(now time.Time) bool {
	if m.detectAt.IsZero() || now.Before(m.detectAt) {
		return false
	}
	m.detectAt = time.Time{}
	m.remoteDisc, m.remoteState = 0, Down
	m.remoteMinRx = time.Microsecond
	if m.state == Init || m.state == Up {
		m.down(DiagDetectExpired)
		return true
	}
	return false
}

// adminDown stops the session on purpose (section 6.8.16): the packets
// that follow tell the neighbour, which must not take it for a failure.
func (m *machine) adminDown() {
	m.state, m.diag = AdminDown, DiagAdminDown
	m.polling, m.sendFinal = false, false
	m.detectAt = time.Time{}
}

// packet is the next packet to send; it clears a pending Final.
func (m *machine) packet() Packet {
	p := Packet{Diag: m.diag, State: m.state, DetectMult: m.mult, MyDisc: m.localDisc, YourDisc: m.remoteDisc,
		DesiredMinTx: m.advertisedTx(), RequiredMinRx: m.interval}
	if m.sendFinal {
		p.Final, m.sendFinal = true, false
	} else if m.polling {
		p.Poll = true
	}
	return p
}
