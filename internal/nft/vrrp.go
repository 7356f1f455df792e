package nft

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// VRRPTable is the family and name of pier's second table: it keeps the
// VRRP adverts of pier's instances to those of their peers (package vrrp
// installs it beside keepalived and removes it when keepalived stops).
// It is separate from the native provider's table, which comes and goes
// with native load balancers.
const VRRPTable = "inet pier_vrrp"

// VRRPGuard is one VRRP instance as the filter sees it: adverts for
// RouterID arriving on Interface are taken from Peers only.
type VRRPGuard struct {
	Interface string
	RouterID  int
	Peers     []netip.Addr
}

// RenderVRRP returns the transaction that replaces pier_vrrp with one
// guarding gs, or deletes it when gs is empty. The output depends only on
// the set of guards.
//
// On the guarded interfaces, for IP protocol 112 only:
//   - a packet with a TTL (hop limit) other than 255 is dropped: VRRP is
//     sent with 255 and never forwarded (RFC 5798 §5.1.1.3), so it
//     crossed a router, whatever its source says;
//   - a packet for a router id pier uses is dropped unless its source is
//     one of that instance's peers (the router id is the second byte of
//     the VRRP header in versions 2 and 3).
//
// Router ids pier does not use pass: another VRRP user on the segment is
// not pier's to filter. Nothing is accepted here that a later chain
// would drop: the chain's policy is accept.
func RenderVRRP(gs []VRRPGuard) ([]byte, error) {
	var t text
	t.line(0, lit("add table inet pier_vrrp"))
	t.line(0, lit("delete table inet pier_vrrp"))
	if len(gs) == 0 {
		return []byte(t.b.String()), nil
	}
	gs, err := normalizeGuards(gs)
	if err != nil {
		return nil, err
	}
	var ifaces []word
	for i, g := range gs {
		if i == 0 || g.Interface != gs[i-1].Interface {
			w, err := ifname(g.Interface)
			if err != nil {
				return nil, err
			}
			ifaces = append(ifaces, w)
		}
	}
	t.line(0, lit("table inet pier_vrrp {"))
	t.line(1, lit("chain input {"))
	t.line(2, lit("type filter hook input priority filter; policy accept;"))
	t.line(2, lit("iifname {"), join(", ", ifaces...), lit("} meta l4proto vrrp jump adverts"))
	t.line(1, lit("}"))
	t.line(1, lit("chain adverts {"))
	t.line(2, lit("ip ttl != 255 drop"))
	t.line(2, lit("ip6 hoplimit != 255 drop"))
	for _, g := range gs {
		iface, err := ifname(g.Interface)
		if err != nil {
			return nil, err
		}
		peers := make([]word, 0, len(g.Peers))
		for _, p := range g.Peers {
			w, err := addr(p)
			if err != nil {
				return nil, err
			}
			peers = append(peers, w)
		}
		saddr := lit("ip saddr != {")
		if g.Peers[0].Is6() {
			saddr = lit("ip6 saddr != {")
		}
		t.line(2, lit("iifname"), iface, lit("@th,8,8"), num(g.RouterID), saddr, join(", ", peers...), lit("} drop"))
	}
	t.line(1, lit("}"))
	t.line(0, lit("}"))
	return []byte(t.b.String()), nil
}

// normalizeGuards checks gs and sorts them (by interface, then router
// id) and their peers.
func normalizeGuards(in []VRRPGuard) ([]VRRPGuard, error) {
	out := make([]VRRPGuard, len(in))
	seen := map[string]map[int]bool{}
	for i, g := range in {
		if g.RouterID < 1 || g.RouterID > 255 {
			return nil, fmt.Errorf("nft: vrrp router id %d: want 1-255", g.RouterID)
		}
		if len(g.Peers) == 0 {
			return nil, fmt.Errorf("nft: vrrp router id %d: no peer", g.RouterID)
		}
		if seen[g.Interface][g.RouterID] {
			return nil, fmt.Errorf("nft: vrrp router id %d twice on one interface", g.RouterID)
		}
		if seen[g.Interface] == nil {
			seen[g.Interface] = map[int]bool{}
		}
		seen[g.Interface][g.RouterID] = true
		g.Peers = slices.Clone(g.Peers)
		for j, p := range g.Peers {
			g.Peers[j] = p.Unmap()
			if g.Peers[j].Is4() != g.Peers[0].Unmap().Is4() {
				return nil, errors.New("nft: vrrp peers of one instance in two address families")
			}
		}
		slices.SortFunc(g.Peers, func(a, b netip.Addr) int { return a.Compare(b) })
		g.Peers = slices.Compact(g.Peers)
		out[i] = g
	}
	slices.SortFunc(out, func(a, b VRRPGuard) int {
		return cmp.Or(cmp.Compare(a.Interface, b.Interface), cmp.Compare(a.RouterID, b.RouterID))
	})
	return out, nil
}
