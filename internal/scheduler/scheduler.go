// Package scheduler is the service-monitor role: it dispatches each
// LoadBalancer on its provider and, for the haproxy provider, places it on
// two ready nodes, active and standby.
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
}

// placer decides where one provider's load balancers run.
type placer func(lb *model.LoadBalancer, nodes Nodes, load map[string]int) (model.Placement, error)

// placers is the service monitor's dispatch: one placement policy per
// provider. A provider missing here has no driver yet.
var placers = map[model.Provider]placer{
	model.ProviderHAProxy: placePair,
}

// Place returns where lb should run, by its provider's policy. load counts
// the LoadBalancers already placed on each node (active or standby).
func Place(lb *model.LoadBalancer, nodes Nodes, load map[string]int) (model.Placement, error) {
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
//   - Free roles go to the least-loaded ready nodes that do not drain,
//     ties broken by name so the choice is deterministic.
//   - With nothing else left, a lone draining standby is promoted rather
//     than leaving the load balancer without an active node.
func placePair(lb *model.LoadBalancer, nodes Nodes, load map[string]int) (model.Placement, error) {
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
	for _, n := range byLoad(fresh, load) {
		switch {
		case n == p.Active || n == p.Standby:
		case p.Active == "":
			p.Active = n
		case p.Standby == "":
			p.Standby = n
		}
	}
	if p.Active == "" && p.Standby != "" {
		p.Active, p.Standby = p.Standby, ""
	}
	if p.Active == "" {
		return model.Placement{}, fmt.Errorf("load balancer %s: every ready node is cordoned", lb.Name)
	}
	return p, nil
}

func byLoad(nodes []string, load map[string]int) []string {
	out := append([]string(nil), nodes...)
	sort.Slice(out, func(i, j int) bool {
		if load[out[i]] != load[out[j]] {
			return load[out[i]] < load[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// Load counts the LoadBalancers placed on each node.
func Load(lbs []*model.LoadBalancer) map[string]int {
	load := map[string]int{}
	for _, lb := range lbs {
		if lb.Placement.Active != "" {
			load[lb.Placement.Active]++
		}
		if lb.Placement.Standby != "" {
			load[lb.Placement.Standby]++
		}
	}
	return load
}
