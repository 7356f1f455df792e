// Package ipam allocates internal VIPs and floating IPs to LoadBalancers.
//
// As in metallb, the allocator is small and pure: the store is the record,
// and the Allocator is a cache rebuilt from it on start (Replay, before
// any Assign) so that no address is handed to a newcomer while its owner
// still lives. Allocation is deterministic: the lowest free address.
package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Pool is a range of addresses parsed from a CIDR prefix (IPv4 or IPv6).
// For IPv4 prefixes shorter than /31 the prefix's own network and
// broadcast addresses are left out; every other address, including a .0
// or .255 inside a larger prefix, is a usable host.
type Pool struct {
	prefix      netip.Prefix
	first, last netip.Addr
}

// ParsePool parses a pool given by the option named flag, which errors
// name: "--internal-pool 10.0.0.0/33: prefix length 33 is out of range for
// IPv4 (0-32)".
func ParsePool(flag, cidr string) (Pool, error) {
	prefix, err := parsePrefix(cidr)
	if err != nil {
		return Pool{}, fmt.Errorf("%s %s: %w", flag, cidr, err)
	}
	p := Pool{prefix: prefix, first: prefix.Addr(), last: lastAddr(prefix)}
	if p.first.Is4() && prefix.Bits() < 31 {
		p.first, p.last = p.first.Next(), p.last.Prev()
	}
	return p, nil
}

// parsePrefix is stricter than netip.ParsePrefix, and says why in words
// an operator reads: a prefix with host bits set is refused, not masked,
// because 10.0.0.5/24 more likely hides a typo than means 10.0.0.0/24.
func parsePrefix(s string) (netip.Prefix, error) {
	addrPart, bitsPart, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, errors.New("not a CIDR prefix: want address/length, such as 127.10.0.0/16")
	}
	addr, err := netip.ParseAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address", addrPart)
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, errors.New("an IPv6 zone is not allowed in a pool")
	}
	if addr.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("IPv4-mapped IPv6 address; write the IPv4 prefix instead")
	}
	bits, err := strconv.Atoi(bitsPart)
	if err != nil || strings.TrimLeft(bitsPart, "0123456789") != "" {
		return netip.Prefix{}, fmt.Errorf("prefix length %q is not a number", bitsPart)
	}
	if bits > addr.BitLen() {
		return netip.Prefix{}, fmt.Errorf("prefix length %d is out of range for %s (0-%d)",
			bits, family(addr), addr.BitLen())
	}
	prefix := netip.PrefixFrom(addr, bits)
	if masked := prefix.Masked(); masked != prefix {
		return netip.Prefix{}, fmt.Errorf("host bits are set; did you mean %s?", masked)
	}
	return prefix, nil
}

func family(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// String is the pool's CIDR prefix.
func (p Pool) String() string { return p.prefix.String() }

// Prefix is the pool's CIDR prefix.
func (p Pool) Prefix() netip.Prefix { return p.prefix }

// Contains reports whether addr is a usable address of the pool.
func (p Pool) Contains(addr netip.Addr) bool {
	if !p.first.IsValid() || !addr.IsValid() {
		return false
	}
	return addr.Compare(p.first) >= 0 && addr.Compare(p.last) <= 0
}

// Size is how many usable addresses the pool holds, saturated at 2^62
// (an IPv6 prefix may hold more than a uint64 counts).
func (p Pool) Size() uint64 {
	if !p.first.IsValid() {
		return 0
	}
	hostBits := p.prefix.Addr().BitLen() - p.prefix.Bits()
	if hostBits >= 62 {
		return 1 << 62
	}
	n := uint64(1) << hostBits
	if p.first != p.prefix.Addr() {
		n -= 2 // an IPv4 network's own and broadcast addresses (ParsePool)
	}
	return n
}

// Overlaps reports whether the two pools share an address, which callers
// may refuse at start: an overlap works (one owner per address) but VIPs
// would eat into the public range.
func (p Pool) Overlaps(q Pool) bool { return p.prefix.Overlaps(q.prefix) }

// lowestFree returns the first address of p that is not taken and is not
// skip. It visits at most one more address than are taken.
func (p Pool) lowestFree(taken func(netip.Addr) bool, skip netip.Addr) (netip.Addr, bool) {
	if !p.first.IsValid() {
		return netip.Addr{}, false
	}
	for a := p.first; ; a = a.Next() {
		if a != skip && !taken(a) {
			return a, true
		}
		if a == p.last {
			return netip.Addr{}, false
		}
	}
}

// FromCIDRs builds an allocator from the --internal-pool and --public-pool
// flag values (public may be empty: no floating IPs unless pinned). The
// pools must not overlap.
func FromCIDRs(internalCIDR, publicCIDR string) (*Allocator, error) {
	internal, err := ParsePool("--internal-pool", internalCIDR)
	if err != nil {
		return nil, err
	}
	var public *Pool
	if publicCIDR != "" {
		pp, err := ParsePool("--public-pool", publicCIDR)
		if err != nil {
			return nil, err
		}
		if pp.Overlaps(internal) {
			return nil, fmt.Errorf("--public-pool %s overlaps --internal-pool %s", pp, internal)
		}
		public = &pp
	}
	return New(internal, public), nil
}
