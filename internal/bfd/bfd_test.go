package bfd

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestPacketRoundTrip(t *testing.T) {
	p := Packet{Diag: DiagNeighborDown, State: Up, Poll: true, DetectMult: 3, MyDisc: 0x01020304, YourDisc: 0xa0b0c0d0,
		DesiredMinTx: 100 * time.Millisecond, RequiredMinRx: 10 * time.Millisecond}
	b := p.Marshal()
	want := []byte{0x23, 0xe0, 3, 24, 1, 2, 3, 4, 0xa0, 0xb0, 0xc0, 0xd0,
		0, 0x01, 0x86, 0xa0, 0, 0, 0x27, 0x10, 0, 0, 0, 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("marshal:\n got % x\nwant % x", b, want)
	}
	got, err := Parse(b)
	if err != nil || got != p {
		t.Fatalf("parse: %+v, %v; want %+v", got, err, p)
	}
	// Trailing bytes past the length field are not the packet's.
	if got, err := Parse(append(b, 0xff, 0xff)); err != nil || got != p {
		t.Fatalf("parse with trailing bytes: %+v, %v", got, err)
	}
}

func TestParseRefuses(t *testing.T) {
	good := Packet{State: Up, DetectMult: 3, MyDisc: 1, YourDisc: 2, DesiredMinTx: time.Second, RequiredMinRx: time.Second}.Marshal()
	with := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrShort},
		{"23 bytes", good[:23], ErrShort},
		{"version 0", with(func(b []byte) []byte { b[0] &= 0x1f; return b }), ErrVersion},
		{"version 2", with(func(b []byte) []byte { b[0] = 2<<5 | b[0]&0x1f; return b }), ErrVersion},
		{"length 23", with(func(b []byte) []byte { b[3] = 23; return b }), ErrLength},
		{"length past the datagram", with(func(b []byte) []byte { b[3] = 25; return b }), ErrLength},
		{"authentication", with(func(b []byte) []byte { b[1] |= flagAuth; return append(b, 1, 2) }), ErrAuth},
		{"authentication, length right", with(func(b []byte) []byte { b[1] |= flagAuth; b[3] = 26; return append(b, 1, 2) }), ErrAuth},
		{"detect mult 0", with(func(b []byte) []byte { b[2] = 0; return b }), ErrDetectMult},
		{"multipoint", with(func(b []byte) []byte { b[1] |= flagMultipoint; return b }), ErrMultipoint},
		{"my discriminator 0", with(func(b []byte) []byte { copy(b[4:8], []byte{0, 0, 0, 0}); return b }), ErrMyDisc},
		{"your discriminator 0 in Up", with(func(b []byte) []byte { copy(b[8:12], []byte{0, 0, 0, 0}); return b }), ErrYourDisc},
		{"poll and final", with(func(b []byte) []byte { b[1] |= flagPoll | flagFinal; return b }), ErrPollFinal},
		{"demand", with(func(b []byte) []byte { b[1] |= flagDemand; return b }), ErrDemand},
	}
	for _, c := range cases {
		if _, err := Parse(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Your discriminator 0 is what a first packet carries, in Down.
	first := with(func(b []byte) []byte { b[1] = byte(Down) << 6; copy(b[8:12], []byte{0, 0, 0, 0}); return b })
	if _, err := Parse(first); err != nil {
		t.Errorf("a first packet (down, your discriminator 0): %v", err)
	}
}

// FuzzParse: whatever comes in, Parse does not panic, and what it takes
// is a packet that encodes back to the same mandatory section.
func FuzzParse(f *testing.F) {
	f.Add(Packet{State: Down, DetectMult: 3, MyDisc: 7, DesiredMinTx: time.Second, RequiredMinRx: 100 * time.Millisecond}.Marshal())
	f.Add(Packet{State: Up, Final: true, DetectMult: 5, MyDisc: 7, YourDisc: 9}.Marshal())
	f.Add([]byte{0x20, 0xc4, 3, 26, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if p.DetectMult == 0 || p.MyDisc == 0 || (p.YourDisc == 0 && p.State > Down) || (p.Poll && p.Final) {
			t.Fatalf("took an invalid packet: %+v", p)
		}
		again, err := Parse(p.Marshal())
		if err != nil || again != p {
			t.Fatalf("re-parse of %+v: %+v, %v", p, again, err)
		}
		// The C bit is not kept; everything else of the 24 bytes is.
		want := bytes.Clone(b[:headerLen])
		want[1] &^= flagControlPlaneInd
		want[3] = headerLen
		if got := p.Marshal(); !bytes.Equal(got, want) {
			t.Fatalf("re-encoded % x, received % x", got, b[:headerLen])
		}
	})
}

// peerPacket is what a neighbour with discriminator 77 sends.
func peerPacket(state State, yours uint32) Packet {
	p := Packet{State: state, DetectMult: 5, MyDisc: 77, YourDisc: yours,
		DesiredMinTx: 50 * time.Millisecond, RequiredMinRx: 20 * time.Millisecond}
	if state < Init {
		p.DesiredMinTx = time.Second
	}
	return p
}

// The three-way handshake, the timers it agrees, the Poll Sequence of the
// interval change, a timeout and the neighbour's admin-down.
func TestMachine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := newMachine(42, 100*time.Millisecond, 3)
	first := m.packet()
	if first.State != Down || first.YourDisc != 0 || first.DesiredMinTx != time.Second || first.RequiredMinRx != 100*time.Millisecond || first.DetectMult != 3 {
		t.Fatalf("first packet %+v: want down, your 0, slow 1 s TX, 100 ms RX, mult 3", first)
	}
	if m.txInterval() != time.Second {
		t.Fatalf("TX interval before Up: %s, want 1s", m.txInterval())
	}
	// A packet for some other session is not taken.
	if taken, _ := m.receive(peerPacket(Init, 41), t0); taken {
		t.Fatal("took a packet with another session's discriminator")
	}
	// Down + neighbour Down → Init.
	if _, changed := m.receive(peerPacket(Down, 0), t0); !changed || m.state != Init {
		t.Fatalf("down + neighbour down: %s, want init", m.state)
	}
	if p := m.packet(); p.State != Init || p.YourDisc != 77 {
		t.Fatalf("init packet %+v", p)
	}
	// Detection time: neighbour's mult × max(our RX, its TX) = 5 × 1 s.
	if d := m.detectTime(); d != 5*time.Second {
		t.Fatalf("detect time in init: %s, want 5s", d)
	}
	// Init + neighbour Up → Up, and a poll for the faster interval.
	if _, changed := m.receive(peerPacket(Up, 42), t0.Add(time.Second)); !changed || m.state != Up {
		t.Fatalf("init + neighbour up: %s", m.state)
	}
	p := m.packet()
	if !p.Poll || p.DesiredMinTx != 100*time.Millisecond {
		t.Fatalf("first packet in Up %+v: want poll and 100 ms TX", p)
	}
	// TX: max(our 100 ms, its min RX 20 ms); detection 5 × max(100, 50).
	if m.txInterval() != 100*time.Millisecond || m.detectTime() != 500*time.Millisecond {
		t.Fatalf("in Up: TX %s, detect %s; want 100ms, 500ms", m.txInterval(), m.detectTime())
	}
	final := peerPacket(Up, 42)
	final.Final = true
	m.receive(final, t0.Add(1100*time.Millisecond))
	if p := m.packet(); p.Poll || m.polling {
		t.Fatalf("poll still on after the final: %+v", p)
	}
	// The neighbour polls: the next packet has F, once.
	poll := peerPacket(Up, 42)
	poll.Poll = true
	m.receive(poll, t0.Add(1200*time.Millisecond))
	if p := m.packet(); !p.Final {
		t.Fatal("no final in answer to a poll")
	}
	if p := m.packet(); p.Final {
		t.Fatal("a second final")
	}
	// A neighbour that wants packets no faster than 300 ms gets them so.
	slow := peerPacket(Up, 42)
	slow.RequiredMinRx = 300 * time.Millisecond
	m.receive(slow, t0.Add(1250*time.Millisecond))
	if m.txInterval() != 300*time.Millisecond {
		t.Fatalf("TX %s with the neighbour's min RX of 300 ms", m.txInterval())
	}
	// Silence: Down just after the detection time, not before.
	last := t0.Add(1250 * time.Millisecond)
	if m.expire(last.Add(499 * time.Millisecond)) {
		t.Fatal("down before the detection time")
	}
	if !m.expire(last.Add(500*time.Millisecond)) || m.state != Down || m.diag != DiagDetectExpired {
		t.Fatalf("after the detection time: %s %s", m.state, m.diag)
	}
	if p := m.packet(); p.YourDisc != 0 || p.DesiredMinTx != time.Second || p.Diag != DiagDetectExpired {
		t.Fatalf("packet after the timeout %+v: want your 0, slow TX, diag 1", p)
	}
	// Down ignores a neighbour still in Up (it must see our Down first).
	if _, changed := m.receive(peerPacket(Up, 42), t0.Add(2*time.Second)); changed {
		t.Fatalf("down + neighbour up changed to %s", m.state)
	}
	// Down + neighbour Init → Up directly.
	m.receive(peerPacket(Init, 42), t0.Add(2100*time.Millisecond))
	if m.state != Up || m.diag != DiagNone {
		t.Fatalf("down + neighbour init: %s", m.state)
	}
	// The neighbour says Down: Down, diag 3.
	m.receive(peerPacket(Down, 42), t0.Add(2200*time.Millisecond))
	if m.state != Down || m.diag != DiagNeighborDown {
		t.Fatalf("up + neighbour down: %s %s", m.state, m.diag)
	}
	// Up again, then the neighbour's admin-down: Down, diag 3.
	m.receive(peerPacket(Init, 42), t0.Add(2300*time.Millisecond))
	m.receive(peerPacket(AdminDown, 42), t0.Add(2400*time.Millisecond))
	if m.state != Down || m.diag != DiagNeighborDown {
		t.Fatalf("up + neighbour admin-down: %s %s", m.state, m.diag)
	}
	// Our own admin-down: packets say so, nothing brings it up.
	m.adminDown()
	if p := m.packet(); p.State != AdminDown || p.Diag != DiagAdminDown {
		t.Fatalf("admin-down packet %+v", p)
	}
	if taken, _ := m.receive(peerPacket(Init, 42), t0.Add(3*time.Second)); taken || m.state != AdminDown {
		t.Fatalf("admin-down took a packet: %s", m.state)
	}
}

// Init times out too; Down does not change on a timeout but forgets the
// neighbour.
func TestMachineInitTimeout(t *testing.T) {
	t0 := time.Unix(1000, 0)
	m := newMachine(42, 100*time.Millisecond, 3)
	m.receive(peerPacket(Down, 0), t0)
	if !m.expire(t0.Add(5*time.Second)) || m.state != Down || m.remoteDisc != 0 {
		t.Fatalf("init after 5 s of silence: %s, remote discriminator %d", m.state, m.remoteDisc)
	}
	m.receive(peerPacket(AdminDown, 42), t0.Add(6*time.Second))
	if m.expire(t0.Add(20*time.Second)) || m.remoteDisc != 0 {
		t.Fatalf("down timed out to %s, remote discriminator %d", m.state, m.remoteDisc)
	}
}

func TestJitter(t *testing.T) {
	m := newMachine(1, 100*time.Millisecond, 3)
	r := newRand()
	for range 1000 {
		if d := m.jitter(100*time.Millisecond, r); d < 75*time.Millisecond || d > 100*time.Millisecond {
			t.Fatalf("jitter %s outside 75-100 ms", d)
		}
	}
	m.mult = 1
	for range 1000 {
		if d := m.jitter(100*time.Millisecond, r); d < 75*time.Millisecond || d > 90*time.Millisecond {
			t.Fatalf("jitter %s outside 75-90 ms with multiplier 1", d)
		}
	}
}
