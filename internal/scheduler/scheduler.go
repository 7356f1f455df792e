// Package scheduler is the service-monitor role: it dispatches each
// LoadBalancer on its provider and places it on two ready nodes, active
// and standby (haproxy and native alike), or, for native load balancers
// with ECMP, on every ready node at once.
package scheduler

import (
	"fmt"
	"sort"

	"pier.dev/pier/internal/model"
)

// ErrUnsupportedProvider is returned for providers with no driver yet.
var ErrUnsupportedProvider = fmt.Errorf("provider has no driver")

// Nodes are the nodes a load balancer may run on.
type Nodes struct {
	// Ready nodes are alive and may keep or take roles, sorted by name.
	Ready []string
	// Draining holds the ready nodes that are cordoned: each keeps the
	// roles it has (a placement never moves while its node lives) but is
	// given no new one, active or standby.
	Draining map[string]bool
	// NativeECMP places native load balancers on every ready node
	// (placeECMP) instead of a pair: the nodes' agents advertise the
	// addresses over BGP with equal preference (pier agent --bgp-ecmp).
	NativeECMP bool
}

// placer decides where one provider's load balancers run. It calls load
// only to choose a role among several nodes.
type placer func(lb *model.LoadBalancer, nodes Nodes, load func() Load) (model.Placement, error)

// placers is the service monitor's dispatch: one placement policy per
// provider. A provider missing here has no driver yet.
var placers = map[model.Provider]placer{
	model.ProviderHAProxy: placePair,
	// native load balancers are nftables rules on the node holding the
	// addresses: the same active/standby pair, so the addresses move
	// with VRRP exactly like an Ingress VIP (the standby's table is hot).
	model.ProviderNative: placePair,
}

// Place returns where lb should run, by its provider's policy. load counts
// the LoadBalancers already placed on each node; it is called only when a
// role is to be chosen among several nodes, so a caller may count lazily:
// most placements keep their nodes, and counting every load balancer for
// each made an endpoint change's reconcile linear in them.
func Place(lb *model.LoadBalancer, nodes Nodes, load func() Load) (model.Placement, error) {
	if lb.Provider == model.ProviderNative && nodes.NativeECMP {
		return placeECMP(lb, nodes)
	}
	place, ok := placers[lb.Provider]
	if !ok {
		return model.Placement{}, fmt.Errorf("load balancer %s: provider %q: %w", lb.Name, lb.Provider, ErrUnsupportedProvider)
	}
	return place(lb, nodes, load)
}

// placePair places an active and a standby node. The rules, in order:
//
//   - A node keeps its role while it is ready, draining or not: a
//     LoadBalancer never moves while its nodes live, which keeps VRRP
//     ownership stable.
//   - When the active is gone, the standby becomes active (it is hot and
//     takes the addresses over, so traffic moves once), unless the standby
//     drains and another node can take the role: then it stays standby.
//   - Free roles go to the least-loaded ready nodes that do not drain:
//     the active role to the node active for the fewest load balancers
//     (it carries their traffic), the standby role to the node with the
//     fewest placements; ties broken by the other count, then by name, so
//     the choice is deterministic. With two nodes, actives alternate.
//   - With nothing else left, a lone draining standby is promoted rather
//     than leaving the load balancer without an active node.
func placePair(lb *model.LoadBalancer, nodes Nodes, load func() Load) (model.Placement, error) {
	if len(nodes.Ready) == 0 {
		return model.Placement{}, fmt.Errorf("load balancer %s: no ready node", lb.Name)
	}
	isReady := map[string]bool{}
	var fresh []string // may take a new role
	for _, n := range nodes.Ready {
		isReady[n] = true
		if !nodes.Draining[n] {
			fresh = append(fresh, n)
		}
	}
	cur := lb.Placement
	keepActive := cur.Active != "" && isReady[cur.Active]
	keepStandby := cur.Standby != "" && isReady[cur.Standby] && cur.Standby != cur.Active
	if keepActive && keepStandby {
		return cur, nil
	}
	var p model.Placement
	switch {
	case keepActive:
		p.Active = cur.Active
	case keepStandby && !nodes.Draining[cur.Standby]:
		p.Active = cur.Standby
	case keepStandby:
		p.Standby = cur.Standby
	}
	if p.Active == "" {
		p.Active = leastLoaded(fresh, p.Standby, Load.byActive, load)
	}
	if p.Standby == "" {
		p.Standby = leastLoaded(fresh, p.Active, Load.byPlaced, load)
	}
	if p.Active == "" && p.Standby != "" {
		p.Active, p.Standby = p.Standby, ""
	}
	if p.Active == "" {
		return model.Placement{}, fmt.Errorf("load balancer %s: every ready node is cordoned", lb.Name)
	}
	return p, nil
}

// placeECMP places a load balancer on every ready node that does not
// drain, and keeps it on the draining nodes it was on: a draining node
// withdraws its routes (its agent drains), and keeping the placement
// keeps its table, so that the flows the routers still send it until
// they have the withdrawal are served. A new load balancer is placed on
// no draining node. Active and Standby are the first two of the set, so
// that what reads a pair (status summary, web, kubectl) reads one.
func placeECMP(lb *model.LoadBalancer, nodes Nodes) (model.Placement, error) {
	was := map[string]bool{}
	for _, n := range lb.Placement.ECMP {
		was[n] = true
	}
	if len(lb.Placement.ECMP) == 0 {
		was[lb.Placement.Active], was[lb.Placement.Standby] = true, true
	}
	var p model.Placement
	for _, n := range nodes.Ready {
		if !nodes.Draining[n] || was[n] {
			p.ECMP = append(p.ECMP, n)
		}
	}
	if len(p.ECMP) == 0 {
		if len(nodes.Ready) == 0 {
			return model.Placement{}, fmt.Errorf("load balancer %s: no ready node", lb.Name)
		}
		return model.Placement{}, fmt.Errorf("load balancer %s: every ready node is cordoned", lb.Name)
	}
	sort.Strings(p.ECMP)
	p.Active = p.ECMP[0]
	if len(p.ECMP) > 1 {
		p.Standby = p.ECMP[1]
	}
	return p, nil
}

// leastLoaded is the first of nodes other than taken in the order rank
// gives them by load, "" when there is none. With one candidate, load is
// not counted.
func leastLoaded(nodes []string, taken string, rank func(Load, []string) []string, load func() Load) string {
	var candidates []string
	for _, n := range nodes {
		if n != taken {
			candidates = append(candidates, n)
		}
	}
	switch len(candidates) {
	case 0:
		return ""
	case 1:
		return candidates[0]
	}
	return rank(load(), candidates)[0]
}

// Load counts, per node, the load balancers placed on it (Placed, as
// active or standby) and those it is the active node of (Active).
type Load struct {
	Placed, Active map[string]int
}

// Add counts a placement. An ECMP placement counts on every node it
// names, active on none: the pairs spread over the nodes as before.
func (l Load) Add(p model.Placement) {
	if len(p.ECMP) > 0 {
		for _, n := range p.ECMP {
			l.Placed[n]++
		}
		return
	}
	if p.Active != "" {
		l.Placed[p.Active]++
		l.Active[p.Active]++
	}
	if p.Standby != "" {
		l.Placed[p.Standby]++
	}
}

// byActive orders nodes by active count, then placements, then name.
func (l Load) byActive(nodes []string) []string {
	return sortedBy(nodes, l.Active, l.Placed)
}

// byPlaced orders nodes by placements, then active count, then name.
func (l Load) byPlaced(nodes []string) []string {
	return sortedBy(nodes, l.Placed, l.Active)
}

func sortedBy(nodes []string, first, second map[string]int) []string {
	out := append([]string(nil), nodes...)
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if first[a] != first[b] {
			return first[a] < first[b]
		}
		if second[a] != second[b] {
			return second[a] < second[b]
		}
		return a < b
	})
	return out
}

// LoadOf counts the placements of lbs.
func LoadOf(lbs []*model.LoadBalancer) Load {
	l := Load{Placed: map[string]int{}, Active: map[string]int{}}
	for _, lb := range lbs {
		l.Add(lb.Placement)
	}
	return l
}
