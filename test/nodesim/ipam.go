package nodesim

import (
	"errors"
	"fmt"
	"net/netip"
)

var errExhausted = errors.New("no free address")

// allocator hands out the addresses of an IPv4 prefix, one per owner. The
// API server's pod status is the record; the allocator is a cache of it,
// so on start the known addresses are replayed (Reserve) before any new
// one is assigned, and no running pod's address is given away.
//
// It is next-fit, like the kubelet's host-local IPAM: a released address
// is reused only after the rest of the range, so a deleted pod's address
// does not reappear at once behind a stale endpoint.
type allocator struct {
	first, last netip.Addr // assignable range, inclusive
	next        netip.Addr
	byAddr      map[netip.Addr]string
	byOwner     map[string]netip.Addr
}

// newAllocator skips the network address, the first host address (the one
// netns puts on lo, the "gateway") and the broadcast address.
func newAllocator(prefix netip.Prefix) (*allocator, error) {
	prefix = prefix.Masked()
	if !prefix.IsValid() || !prefix.Addr().Is4() || prefix.Bits() > 29 {
		return nil, fmt.Errorf("pod CIDR %s: want an IPv4 prefix of /29 or larger", prefix)
	}
	first := prefix.Addr().Next().Next()
	last := lastAddr(prefix).Prev()
	return &allocator{
		first: first, last: last, next: first,
		byAddr: map[netip.Addr]string{}, byOwner: map[string]netip.Addr{},
	}, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (a *allocator) contains(ip netip.Addr) bool {
	return ip.IsValid() && a.first.Compare(ip) <= 0 && ip.Compare(a.last) <= 0
}

// Reserve records that owner holds ip. It fails if ip is outside the range
// or held by someone else; an owner holding another address moves.
func (a *allocator) Reserve(owner string, ip netip.Addr) error {
	if !a.contains(ip) {
		return fmt.Errorf("%s is outside %s-%s", ip, a.first, a.last)
	}
	if held, ok := a.byAddr[ip]; ok && held != owner {
		return fmt.Errorf("%s is held by %s", ip, held)
	}
	a.Release(owner)
	a.byAddr[ip], a.byOwner[owner] = owner, ip
	return nil
}

// Assign returns owner's address, taking the next free one if it has none.
func (a *allocator) Assign(owner string) (netip.Addr, error) {
	if ip, ok := a.byOwner[owner]; ok {
		return ip, nil
	}
	for ip := a.next; ; {
		if _, taken := a.byAddr[ip]; !taken {
			a.byAddr[ip], a.byOwner[owner] = owner, ip
			a.next = a.after(ip)
			return ip, nil
		}
		if ip = a.after(ip); ip == a.next {
			return netip.Addr{}, fmt.Errorf("%w in %s-%s", errExhausted, a.first, a.last)
		}
	}
}

func (a *allocator) after(ip netip.Addr) netip.Addr {
	if ip == a.last {
		return a.first
	}
	return ip.Next()
}

// Release frees owner's address, if any.
func (a *allocator) Release(owner string) {
	if ip, ok := a.byOwner[owner]; ok {
		delete(a.byAddr, ip)
		delete(a.byOwner, owner)
	}
}
