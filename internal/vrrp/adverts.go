package vrrp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// protocolVRRP is VRRP's IP protocol number.
const protocolVRRP = 112

// Adverts hears the VRRP adverts that reach this node, the way keepalived
// does: through raw sockets for IP protocol 112, so after the kernel's
// input filter. A node whose keepalived is held in FAULT (the API server
// fenced it in a split brain) sends no adverts and takes no part in the
// election, but its Adverts still tells whether the peer's adverts get
// through: when they do, the nodes hear each other again and the split
// brain is over (agent.arbitrate).
type Adverts struct {
	conns []net.PacketConn

	mu    sync.Mutex
	heard map[advertFrom]time.Time
}

type advertFrom struct {
	routerID int
	from     netip.Addr
}

// ListenAdverts starts hearing adverts in network namespace netns (""
// for this process's own). IPv6 is heard too where the host has it.
func ListenAdverts(netns string) (*Adverts, error) {
	a := &Adverts{heard: map[advertFrom]time.Time{}}
	err := netnsdo.Do(netns, func() error {
		c4, err := net.ListenPacket(fmt.Sprintf("ip4:%d", protocolVRRP), "0.0.0.0")
		if err != nil {
			return err
		}
		a.conns = append(a.conns, c4)
		if c6, err := net.ListenPacket(fmt.Sprintf("ip6:%d", protocolVRRP), "::"); err == nil {
			a.conns = append(a.conns, c6)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen for vrrp adverts: %w", err)
	}
	for _, c := range a.conns {
		go a.read(c)
	}
	return a, nil
}

// read records each advert until c is closed.
func (a *Adverts) read(c net.PacketConn) {
	buf := make([]byte, 2048)
	for {
		n, addr, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		routerID, ok := parseAdvert(buf[:n])
		ip, isIP := addr.(*net.IPAddr)
		if !ok || !isIP {
			continue
		}
		from, ok := netip.AddrFromSlice(ip.IP)
		if !ok {
			continue
		}
		a.mu.Lock()
		a.heard[advertFrom{routerID: routerID, from: from.Unmap()}] = time.Now()
		a.mu.Unlock()
	}
}

// parseAdvert returns the virtual router id of a VRRP (version 2 or 3)
// advertisement, the IP header already stripped.
func parseAdvert(b []byte) (routerID int, ok bool) {
	if len(b) < 8 {
		return 0, false
	}
	version, typ := b[0]>>4, b[0]&0x0f
	if (version != 2 && version != 3) || typ != 1 || b[1] == 0 {
		return 0, false
	}
	return int(b[1]), true
}

// LastHeard is when the last advert of virtual router routerID came from
// address from; the zero time if none did.
func (a *Adverts) LastHeard(routerID int, from netip.Addr) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.heard[advertFrom{routerID: routerID, from: from.Unmap()}]
}

// Close stops hearing.
func (a *Adverts) Close() error {
	var errs []error
	for _, c := range a.conns {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
