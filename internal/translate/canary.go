package translate

import (
	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// canaryRef is one route of a canary Ingress, waiting for the main route
// with the same host and path.
type canaryRef struct {
	p *parsedIngress
	r route
	// attached says a main route took it.
	attached bool
}

// canaryKey names a route by namespace, host and path, as a canary must
// match its main route.
func canaryKey(ns string, r route) string {
	return ns + "\x00" + string(r.hostMatch) + "\x00" + r.host + "\x00" + string(r.pathMatch) + "\x00" + r.path
}

// splitCanaries takes the canary Ingresses out of parsed (they get no
// load balancer of their own) and indexes their routes, oldest first.
func splitCanaries(parsed []*parsedIngress) ([]*parsedIngress, map[string][]*canaryRef, []*canaryRef) {
	var mains []*parsedIngress
	index := map[string][]*canaryRef{}
	var all []*canaryRef
	for _, p := range parsed {
		if !p.settings.Canary.Enabled {
			mains = append(mains, p)
			continue
		}
		for _, r := range p.routes {
			c := &canaryRef{p: p, r: r}
			index[canaryKey(p.source.Namespace, r)] = append(index[canaryKey(p.source.Namespace, r)], c)
			all = append(all, c)
		}
	}
	return mains, index, all
}

// attachCanary gives a kept main route the oldest canary of its host
// and path, adding the canary's pool and source to the load balancer;
// a newer canary of the same route is refused (an Error: not served).
func attachCanary(k *keptRoute, index map[string][]*canaryRef, pools map[string]*model.Pool, lb *model.LoadBalancer,
	sources map[string]bool) []model.Problem {
	refs := index[canaryKey(k.owner.source.Namespace, k.route)]
	if len(refs) == 0 {
		return nil
	}
	c := refs[0]
	c.attached = true
	s := c.p.settings.Canary
	k.canary = &model.Canary{PoolID: c.r.poolID, Weight: s.Weight, WeightTotal: s.Total, Header: s.Header,
		Cookie: s.Cookie, Source: c.p.source}
	if s.Header != "" {
		k.canary.HeaderValue = s.HeaderValue
		if s.HeaderValue == "" {
			k.canary.HeaderPattern = s.HeaderPattern
		}
	}
	addPool(pools, c.p.pools[c.r.poolID])
	if !sources[c.p.source.Key()] {
		sources[c.p.source.Key()] = true
		lb.Sources = append(lb.Sources, c.p.source)
	}
	var problems []model.Problem
	for _, other := range refs[1:] {
		other.attached = true // not served, but said why below
		problems = append(problems, refusal(other.p.ing, "CanaryConflict", other.r.field,
			"host %s path %s already has the canary of %s (older): this one is not served", annotation.QuoteForMessage(k.host),
			annotation.QuoteForMessage(k.path), c.p.source.Key()))
	}
	return problems
}

// unattachedCanaries reports each canary route no main route took, as
// an Error: that route is not served (a canary of another namespace never
// takes a host's traffic).
func unattachedCanaries(all []*canaryRef) []model.Problem {
	var out []model.Problem
	for _, c := range all {
		if !c.attached {
			out = append(out, refusal(c.p.ing, "CanaryWithoutMain", c.r.field,
				"no Ingress of namespace %s serves host %s path %s without canary: this canary route is not served",
				c.p.source.Namespace, annotation.QuoteForMessage(c.r.host), annotation.QuoteForMessage(c.r.path)))
		}
	}
	return out
}
