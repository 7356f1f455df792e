// Package nft renders pier's nftables tables. It is pure: each renderer
// turns pier's values into the text of one `nft -f -` transaction, which
// its caller runs.
//
//   - inet pier_native (Render, this file and render.go): the native
//     provider's L4 load balancing in the kernel, DNAT from a load
//     balancer's addresses to its ready endpoints; the agent's native
//     driver runs it.
//   - inet pier_vrrp (RenderVRRP, vrrp.go): the VRRP adverts of pier's
//     instances taken from their peers only; package vrrp runs it beside
//     keepalived.
//
// Nothing else is touched. Of pier_native: one table holds every native
// load balancer of the node. The first transaction creates the table;
// each later one changes only what differs, element by element, and the
// kernel commits it as one (Render says why element by element).
// Connections already established keep their NAT binding in conntrack:
// rules are only read for a connection's first packet, so changing
// endpoints never cuts a connection.
//
// The layout:
//
//	map services   addr . proto . port : goto svc_<id>  (nat prerouting, nat output)
//	chain svc_<id> dnat ip to numgen random mod N map @eps_<id>
//	               (jhash ip saddr instead of numgen with source affinity;
//	               jhash of the flow's addresses and ports mod 251 into a
//	               Maglev table when Consistent, for ECMP); before it,
//	               with a reject share, numgen (jhash) mod T < R goto
//	               no_endpoints
//	map eps_<id>   i : endpoint i mod N (entries past N linger one change);
//	               with weights, each endpoint holds as many of the N
//	               slots as its weight asks (weights.go)
//	set rejects    addr . proto . port of services with no endpoint
//	               (filter input, forward, output: TCP reset, ICMP port unreachable)
//	set addrs      every address served; DNATed connections to them are
//	               masqueraded (nat postrouting, except on lo) so replies
//	               come back here
//
// Spreading: numgen random picks the endpoint of each new connection
// uniformly, as kube-proxy's nftables mode does; it needs no state and no
// counter that a flush would reset, and over 1,000 connections to 3
// endpoints each gets 333±15 (one standard deviation).
package nft

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Table is the family and name of pier's table.
const Table = "inet pier_native"

// Proto is a service's transport protocol.
type Proto uint8

const (
	TCP Proto = iota + 1
	UDP
)

// Backend is one ready endpoint.
type Backend struct {
	Addr netip.Addr
	Port uint16
	// Weight is the endpoint's share of the service's new flows against
	// the other endpoints' weights (weights.go); 0 counts as 1, so a
	// Service's endpoints, which carry none, spread evenly.
	Weight int64
}

// Service is one address family of a load balancer's listener: traffic to
// any of Addrs on Proto/Port goes to one of Backends.
type Service struct {
	// ID names the service's chain (svc_<ID>); pier derives it from the
	// load balancer's UUID and the listener: [a-z0-9]{1,24}.
	ID       string
	Addrs    []netip.Addr
	Proto    Proto
	Port     uint16
	Backends []Backend
	// SourceHash keeps a client address on one endpoint (while the
	// endpoints do not change) instead of spreading its connections.
	SourceHash bool
	// Consistent picks the endpoint of a new flow by a hash of its
	// addresses and ports (jhash, a fixed seed) into a Maglev table of
	// MaglevSlots entries filled from the sorted endpoints (maglev.go):
	// every node serving the service computes the same endpoint for a
	// flow, so one a router moves to another node (ECMP) is sent to the
	// endpoint it started on. It wins over SourceHash.
	Consistent bool
	// Reject of every RejectOf new flows are refused (TCP reset, ICMP
	// port unreachable) before an endpoint is picked: the share of a
	// UDPRoute's backendRefs that do not resolve or whose Service has no
	// ready endpoint, which the Gateway API wants refused rather than
	// given to the others. 0 for none; with no backend every flow is
	// refused whatever these say.
	Reject, RejectOf int64
	// Slots is how many entries its endpoint map holds once Render's
	// transaction ran (Render fills it in; see update.go).
	Slots int
}

// key is what the kernel dispatches on.
type key struct {
	addr  netip.Addr
	proto Proto
	port  uint16
}

// normalize sorts services by ID and their addresses and backends, and
// drops duplicate backends, so the output is the same for the same set.
func normalize(in []Service) []Service {
	out := make([]Service, len(in))
	for i, s := range in {
		s.Addrs = slices.Clone(s.Addrs)
		slices.SortFunc(s.Addrs, func(a, b netip.Addr) int { return a.Compare(b) })
		s.Addrs = slices.Compact(s.Addrs)
		s.Backends = slices.Clone(s.Backends)
		slices.SortFunc(s.Backends, func(a, b Backend) int {
			if c := a.Addr.Compare(b.Addr); c != 0 {
				return c
			}
			return int(a.Port) - int(b.Port)
		})
		s.Backends = slices.Compact(s.Backends)
		out[i] = s
	}
	slices.SortFunc(out, func(a, b Service) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func checkUnique(svcs []Service) error {
	seen := map[key]string{}
	ids := map[string]bool{}
	for _, s := range svcs {
		if ids[s.ID] {
			return errors.New("nft: two services with one ID")
		}
		ids[s.ID] = true
		for _, a := range s.Addrs {
			k := key{a, s.Proto, s.Port}
			if other, dup := seen[k]; dup {
				return fmt.Errorf("nft: services %s and %s both serve %s port %d", other, s.ID, a, s.Port)
			}
			seen[k] = s.ID
		}
	}
	return nil
}

// renderHooks writes the base chains. The nat hooks dispatch new
// connections (prerouting: from the network; output: from this host).
// The filter hooks refuse connections to a service with no endpoint, on
// whichever path the packet takes: input when this node holds the
// address, forward when it only routes it, output from this host.
func renderHooks(t *text) {
	dispatch := lit("ip daddr . meta l4proto . th dport vmap @services")
	reject := lit("ip daddr . meta l4proto . th dport @rejects goto no_endpoints")
	base := []struct {
		name, hook keyword
		rule       word
	}{
		{"nat_prerouting", "type nat hook prerouting priority dstnat; policy accept;", dispatch},
		{"nat_output", "type nat hook output priority -100; policy accept;", dispatch},
		{"nat_postrouting", "type nat hook postrouting priority srcnat; policy accept;",
			// Not on loopback: a connection from this host to a local
			// endpoint (pier run) needs no return path, and masquerading
			// it on lo stalls it.
			lit(`oifname != "lo" ct status dnat ct original ip daddr @addrs masquerade`)},
		{"filter_input", "type filter hook input priority filter; policy accept;", reject},
		{"filter_forward", "type filter hook forward priority filter; policy accept;", reject},
		{"filter_output", "type filter hook output priority filter; policy accept;", reject},
	}
	t.line(1, lit("chain no_endpoints {"))
	t.line(2, lit("meta l4proto tcp reject with tcp reset"))
	t.line(2, lit("reject with icmpx port-unreachable"))
	t.line(1, lit("}"))
	for _, b := range base {
		t.line(1, lit("chain"), lit(b.name), lit("{"))
		t.line(2, lit(b.hook))
		t.line(2, b.rule)
		t.line(1, lit("}"))
	}
}
