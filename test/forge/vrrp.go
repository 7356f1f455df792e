//go:build linux

// Package forge sends what a hostile neighbour on the node segment would:
// VRRP adverts for pier's router ids, from a lab host that is no node.
// The tests of the advert filter use it (internal/vrrp, test/pair).
package forge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"pier.dev/pier/internal/netnsdo"
)

// Advert is one forged VRRPv3 advertisement (RFC 5798 §5.2), as keepalived
// with `version 3` sends and reads it.
type Advert struct {
	RouterID int
	Priority int           // 255: "I own the addresses", above any node
	Interval time.Duration // the Max Adver Int it carries (centiseconds)
	// Addrs are the instance's addresses: keepalived drops an advert
	// whose list differs from its own, so a forger copies them (they are
	// in the Ingress status).
	Addrs []netip.Addr
}

// marshal returns the VRRP packet (no IP header) for src → dst: the v3
// checksum covers an IPv4 pseudo-header.
func (a Advert) marshal(src, dst netip.Addr) []byte {
	b := make([]byte, 8, 8+4*len(a.Addrs))
	b[0] = 3<<4 | 1 // version 3, type advertisement
	b[1] = byte(a.RouterID)
	b[2] = byte(a.Priority)
	b[3] = byte(len(a.Addrs))
	binary.BigEndian.PutUint16(b[4:], uint16(a.Interval.Milliseconds()/10)&0x0fff)
	for _, addr := range a.Addrs {
		v := addr.As4()
		b = append(b, v[:]...)
	}
	pseudo := make([]byte, 0, 12+len(b))
	s, d := src.As4(), dst.As4()
	pseudo = append(pseudo, s[:]...)
	pseudo = append(pseudo, d[:]...)
	pseudo = append(pseudo, 0, 112, byte(len(b)>>8), byte(len(b)))
	pseudo = append(pseudo, b...)
	binary.BigEndian.PutUint16(b[6:], checksum(pseudo))
	return b
}

func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// Options say how the adverts leave.
type Options struct {
	// From is the source address the adverts claim; the zero Addr: the
	// host's own. Another address is the spoof a neighbour can send.
	From netip.Addr
	// TTL of the adverts; 0: 255, as VRRP sends them. Less is what
	// arrives from beyond a router.
	TTL int
	// Every is the sending interval; 0: 100 ms.
	Every time.Duration
}

// Sender sends an advert to its targets until stopped.
type Sender struct {
	conn *ipv4.RawConn
	stop chan struct{}
	wg   sync.WaitGroup
	sent atomic.Int64
	errs atomic.Int64
}

// Start sends adv from the host in network namespace netns whose
// address is src to every target, unicast as pier's keepalived sends
// adverts, with its own IP header (so any source and TTL, as a neighbour
// on the segment can).
func Start(netns string, src netip.Addr, targets []netip.Addr, adv Advert, opts Options) (*Sender, error) {
	if !src.Is4() || len(targets) == 0 {
		return nil, errors.New("forge: an IPv4 source and at least one target")
	}
	from := src
	if opts.From.IsValid() {
		from = opts.From
	}
	if opts.TTL == 0 {
		opts.TTL = 255
	}
	if opts.Every == 0 {
		opts.Every = 100 * time.Millisecond
	}
	var pc net.PacketConn
	err := netnsdo.Do(netns, func() error {
		c, err := net.ListenPacket("ip4:112", src.String())
		pc = c
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forge: raw socket in %s: %w", netns, err)
	}
	conn, err := ipv4.NewRawConn(pc) // sets IP_HDRINCL
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("forge: %w", err)
	}
	s := &Sender{conn: conn, stop: make(chan struct{})}
	s.wg.Go(func() {
		tick := time.NewTicker(opts.Every)
		defer tick.Stop()
		for {
			for _, dst := range targets {
				payload := adv.marshal(from, dst)
				h := &ipv4.Header{Version: 4, Len: ipv4.HeaderLen, TotalLen: ipv4.HeaderLen + len(payload),
					TTL: opts.TTL, Protocol: 112, Src: from.AsSlice(), Dst: dst.AsSlice()}
				if err := conn.WriteTo(h, payload, nil); err != nil {
					s.errs.Add(1)
				} else {
					s.sent.Add(1)
				}
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	})
	return s, nil
}

// Stop ends the sending and returns how many adverts went out and how
// many sends failed.
func (s *Sender) Stop() (sent, failed int64) {
	close(s.stop)
	s.wg.Wait()
	s.conn.Close()
	return s.sent.Load(), s.errs.Load()
}
