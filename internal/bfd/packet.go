// Package bfd is a small implementation of Bidirectional Forwarding
// Detection (RFC 5880) for single-hop sessions over UDP (RFC 5881): the
// agent runs one session per BGP peer so that the router and the agent
// learn that the other stopped answering in a few hundred milliseconds
// instead of BGP's hold time of seconds.
//
// Only what a BGP speaker on a host needs: asynchronous mode, no echo, no
// demand mode, no authentication (a packet asking for it is refused), the
// active role. Packets are sent with a TTL (hop limit) of 255 and a packet
// that arrives with less is dropped, so that nothing more than one hop
// away can speak to a session (RFC 5881 section 5, the GTSM check).
package bfd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// State is a session's state (RFC 5880 section 4.1, the Sta field).
type State uint8

const (
	AdminDown State = 0
	Down      State = 1
	Init      State = 2
	Up        State = 3
)

func (s State) String() string {
	switch s {
	case AdminDown:
		return "admin-down"
	case Down:
		return "down"
	case Init:
		return "init"
	case Up:
		return "up"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Diag says why a session last left Up (RFC 5880 section 4.1).
type Diag uint8

const (
	DiagNone            Diag = 0
	DiagDetectExpired   Diag = 1  // no packet within the detection time
	DiagNeighborDown    Diag = 3  // the neighbour said its session is down
	DiagAdminDown       Diag = 7  // stopped here on purpose
	maxDiag                  = 31 // the field is 5 bits
	headerLen                = 24 // the mandatory section
	version                  = 1
	flagPoll                 = 0x20
	flagFinal                = 0x10
	flagControlPlaneInd      = 0x08
	flagAuth                 = 0x04
	flagDemand               = 0x02
	flagMultipoint           = 0x01
)

func (d Diag) String() string {
	switch d {
	case DiagNone:
		return "none"
	case DiagDetectExpired:
		return "control detection time expired"
	case 2:
		return "echo function failed"
	case DiagNeighborDown:
		return "neighbor signaled session down"
	case 4:
		return "forwarding plane reset"
	case 5:
		return "path down"
	case 6:
		return "concatenated path down"
	case DiagAdminDown:
		return "administratively down"
	case 8:
		return "reverse concatenated path down"
	}
	return fmt.Sprintf("diag(%d)", uint8(d))
}

// Packet is a BFD Control packet's mandatory section.
type Packet struct {
	Diag       Diag
	State      State
	Poll       bool
	Final      bool
	DetectMult uint8
	MyDisc     uint32
	YourDisc   uint32
	// The intervals, carried in microseconds.
	DesiredMinTx  time.Duration
	RequiredMinRx time.Duration
	// RequiredMinEchoRx is always 0 from this package (no echo).
	RequiredMinEchoRx time.Duration
}

// Marshal encodes p as the 24 bytes of a packet without authentication.
func (p Packet) Marshal() []byte {
	b := make([]byte, headerLen)
	b[0] = version<<5 | byte(p.Diag&maxDiag)
	b[1] = byte(p.State&3) << 6
	if p.Poll {
		b[1] |= flagPoll
	}
	if p.Final {
		b[1] |= flagFinal
	}
	b[2] = p.DetectMult
	b[3] = headerLen
	binary.BigEndian.PutUint32(b[4:], p.MyDisc)
	binary.BigEndian.PutUint32(b[8:], p.YourDisc)
	binary.BigEndian.PutUint32(b[12:], micros(p.DesiredMinTx))
	binary.BigEndian.PutUint32(b[16:], micros(p.RequiredMinRx))
	binary.BigEndian.PutUint32(b[20:], micros(p.RequiredMinEchoRx))
	return b
}

func micros(d time.Duration) uint32 {
	us := d.Microseconds()
	switch {
	case us < 0:
		return 0
	case us > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(us)
}

// Errors of Parse: a packet that fails any check is dropped (RFC 5880
// section 6.8.6) and changes nothing.
var (
	ErrShort      = errors.New("shorter than the 24-byte mandatory section")
	ErrVersion    = errors.New("not BFD version 1")
	ErrLength     = errors.New("length field disagrees with the datagram")
	ErrDetectMult = errors.New("detect multiplier 0")
	ErrMultipoint = errors.New("multipoint bit set")
	ErrMyDisc     = errors.New("my discriminator 0")
	ErrYourDisc   = errors.New("your discriminator 0 outside the down and admin-down states")
	ErrAuth       = errors.New("authentication asked for, which this implementation does not do")
	ErrPollFinal  = errors.New("both poll and final bits set")
	ErrDemand     = errors.New("demand mode asked for, which this implementation does not do")
)

// Parse decodes and checks a received packet: the reception checks of
// RFC 5880 section 6.8.6 that need no session, and a refusal of what this
// implementation does not do (authentication, demand mode).
func Parse(b []byte) (Packet, error) {
	if len(b) < headerLen {
		return Packet{}, ErrShort
	}
	if b[0]>>5 != version {
		return Packet{}, ErrVersion
	}
	flags := b[1] & 0x3f
	length := int(b[3])
	// With the A bit the length would be at least 26; it is refused
	// below either way, so any length under 24 or past the datagram is.
	if length < headerLen || length > len(b) {
		return Packet{}, ErrLength
	}
	if flags&flagAuth != 0 {
		return Packet{}, ErrAuth
	}
	p := Packet{
		Diag: Diag(b[0] & maxDiag), State: State(b[1] >> 6),
		Poll: flags&flagPoll != 0, Final: flags&flagFinal != 0,
		DetectMult:        b[2],
		MyDisc:            binary.BigEndian.Uint32(b[4:]),
		YourDisc:          binary.BigEndian.Uint32(b[8:]),
		DesiredMinTx:      time.Duration(binary.BigEndian.Uint32(b[12:])) * time.Microsecond,
		RequiredMinRx:     time.Duration(binary.BigEndian.Uint32(b[16:])) * time.Microsecond,
		RequiredMinEchoRx: time.Duration(binary.BigEndian.Uint32(b[20:])) * time.Microsecond,
	}
	switch {
	case p.DetectMult == 0:
		return Packet{}, ErrDetectMult
	case flags&flagMultipoint != 0:
		return Packet{}, ErrMultipoint
	case p.MyDisc == 0:
		return Packet{}, ErrMyDisc
	case p.YourDisc == 0 && p.State != Down && p.State != AdminDown:
		return Packet{}, ErrYourDisc
	case p.Poll && p.Final:
		// RFC 5880 section 4.1: a system MUST NOT set both.
		return Packet{}, ErrPollFinal
	case flags&flagDemand != 0:
		// A neighbour that sets D asks this side to stop its periodic
		// packets once both are Up and to rely on something else to
		// see it alive, which this implementation has not. Refuse.
		return Packet{}, ErrDemand
	}
	return p, nil
}
