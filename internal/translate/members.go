package translate

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// An endpoint is whatever address its EndpointSlice says, and whoever may
// write EndpointSlices (or a Service without selector, or a hostNetwork
// pod) chooses it. Some addresses turn the load balancer against its own
// node or itself:
//   - link-local: 169.254.169.254 is the cloud's metadata service, with
//     the node's credentials;
//   - loopback: the node's own services, pier's API among them, on the
//     public address;
//   - pier's address pools: a load balancer proxying to a VIP, its own or
//     another's, is a loop (5 slow clients made 584 connections).
// Such endpoints are not members; the Ingress gets a warning naming them.

// linkLocal are the link-local ranges, refused always.
var linkLocal = []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16"), netip.MustParsePrefix("fe80::/10")}

// MemberPolicy is which endpoint addresses may become members.
type MemberPolicy struct {
	// AllowLoopback admits loopback endpoints: pier run on one machine,
	// whose examples run their backends on 127.0.0.1 and whose manifests
	// are the operator's own.
	AllowLoopback bool
	// Pools are pier's address pools.
	Pools []netip.Prefix
	// Reserved are endpoints pier itself listens on (its API), refused
	// even where loopback is allowed.
	Reserved []netip.AddrPort
}

// NewMemberPolicy builds a policy from pool CIDRs and the API's listen
// address (host:port; an empty or unspecified host stands for every
// loopback address). Empty pools are skipped.
func NewMemberPolicy(allowLoopback bool, apiAddr string, pools ...string) (MemberPolicy, error) {
	p := MemberPolicy{AllowLoopback: allowLoopback}
	for _, s := range pools {
		if s == "" {
			continue
		}
		prefix, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("pool %q: %w", s, err)
		}
		p.Pools = append(p.Pools, prefix.Masked())
	}
	if apiAddr != "" {
		host, portText, err := net.SplitHostPort(apiAddr)
		if err != nil {
			return p, fmt.Errorf("API address %q: %w", apiAddr, err)
		}
		port, err := strconv.ParseUint(portText, 10, 16)
		if err != nil {
			return p, fmt.Errorf("API address %q: %w", apiAddr, err)
		}
		addrs := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
		if a, err := netip.ParseAddr(host); err == nil && !a.IsUnspecified() {
			addrs = []netip.Addr{a.Unmap()}
		}
		for _, a := range addrs {
			p.Reserved = append(p.Reserved, netip.AddrPortFrom(a, uint16(port)))
		}
	}
	return p, nil
}

// refusal says why an endpoint may not be a member; "" when it may.
func (p MemberPolicy) refusal(a netip.Addr, port int) string {
	a = a.Unmap()
	for _, r := range p.Reserved {
		// The API on 127.0.0.1 is reachable through all of 127/8.
		if int(r.Port()) == port && (r.Addr() == a || (r.Addr().IsLoopback() && a.IsLoopback())) {
			return "pier's own API"
		}
	}
	for _, ll := range linkLocal {
		if ll.Contains(a) {
			return "a link-local address (the node's metadata service and neighbours)"
		}
	}
	if a.IsLoopback() && !p.AllowLoopback {
		return "a loopback address (the node's own services)"
	}
	for _, pool := range p.Pools {
		if pool.Contains(a) {
			return "in pier's address pool " + pool.String() + " (a load balancer would proxy to a VIP: a loop)"
		}
	}
	return ""
}
