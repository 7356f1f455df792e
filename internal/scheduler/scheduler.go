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

// placer decides where one provider's load balancers run.
type placer func(lb *model.LoadBalancer, ready []string, load map[string]int) (model.Placement, error)

// placers is the service monitor's dispatch: one placement policy per
// provider. A provider missing here has no driver yet.
var placers = map[model.Provider]placer{
	model.ProviderHAProxy: placePair,
}

// Place returns where lb should run, by its provider's policy. load counts
// the LoadBalancers already placed on each node (active or standby).
func Place(lb *model.LoadBalancer, ready []string, load map[string]int) (model.Placement, error) {
	place, ok := placers[lb.Provider]
	if !ok {
		return model.Placement{}, fmt.Errorf("load balancer %s: provider %q: %w", lb.Name, lb.Provider, ErrUnsupportedProvider)
	}
	return place(lb, ready, load)
}

// placePair places an active and a standby node. A placement whose nodes
// are all still ready is kept: a LoadBalancer never moves while its nodes
// live, which keeps VRRP ownership stable. Otherwise the least-loaded
// ready nodes are chosen, ties broken by name so the choice is
// deterministic.
func placePair(lb *model.LoadBalancer, ready []string, load map[string]int) (model.Placement, error) {
	if len(ready) == 0 {
		return model.Placement{}, fmt.Errorf("load balancer %s: no ready node", lb.Name)
	}
	isReady := map[string]bool{}
	for _, n := range ready {
		isReady[n] = true
	}
	cur := lb.Placement
	keepActive := cur.Active != "" && isReady[cur.Active]
	keepStandby := cur.Standby != "" && isReady[cur.Standby] && cur.Standby != cur.Active
	if keepActive && (keepStandby || len(ready) == 1) {
		if len(ready) == 1 {
			cur.Standby = ""
		}
		return cur, nil
	}
	candidates := byLoad(ready, load)
	var p model.Placement
	switch {
	case keepActive:
		// The standby went away: pick a new one, the active stays.
		p.Active = cur.Active
	case keepStandby:
		// The active went away: the standby already holds the VIP, so it
		// becomes active rather than moving traffic twice.
		p.Active = cur.Standby
	}
	for _, n := range candidates {
		switch {
		case p.Active == "":
			p.Active = n
		case p.Standby == "" && n != p.Active:
			p.Standby = n
		}
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
