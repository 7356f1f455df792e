package translate

import (
	"sort"

	"pier.dev/pier/internal/model"
)

// keptRoute is a route that won its host+path, with the Ingress it came
// from.
type keptRoute struct {
	route
	owner *parsedIngress
	// canary, when set, is the canary Ingress that shares the route.
	canary *model.Canary
}

// policiesFor orders routes into L7Policies. HAProxy takes the first
// use_backend that matches, so the order is the precedence of Ingress v1
// (and of the Gateway API where Ingress is silent):
//
//  1. a specific host before a wildcard host before rules with no host;
//  2. Exact paths before regular-expression paths before Prefix paths;
//  3. longer paths before shorter ones ("/" last; for regular
//     expressions the length as written, as ingress-nginx sorts them);
//  4. then path, host and the owning Ingress's age, only for determinism.
//
// http says the policies are for the HTTP listener, where ssl-redirect
// applies; served are the hosts the HTTPS listener has a certificate
// for (nil when there is none).
func policiesFor(routes []keptRoute, http bool, served map[string]bool) []model.L7Policy {
	sorted := append([]keptRoute(nil), routes...)
	sort.SliceStable(sorted, func(i, j int) bool { return routeBefore(sorted[i], sorted[j]) })
	policies := make([]model.L7Policy, 0, len(sorted))
	for i, r := range sorted {
		var rules []model.L7Rule
		if r.hostMatch != "" {
			rules = append(rules, model.L7Rule{Type: model.RuleHostName, Compare: r.hostMatch, Value: r.host})
		}
		rules = append(rules, model.L7Rule{Type: model.RulePath, Compare: r.pathMatch, Value: r.path})
		policies = append(policies, model.L7Policy{
			ID:       model.ID("policy", string(r.hostMatch), r.host, string(r.pathMatch), r.path),
			Position: i + 1,
			Action:   model.ActionRedirectToPool,
			PoolID:   r.poolID,
			Rules:    rules,
			Source:   r.owner.source,
			Options:  withCanary(r.owner.policyOptions(r.route, http, served[r.host]), r),
		})
	}
	return policies
}

func hostRank(c model.CompareType) int {
	switch c {
	case model.CompareEqualTo:
		return 0
	case model.CompareWildcard:
		return 1
	}
	return 2
}

// pathRank: Exact, then regular expressions (nginx tries them after its
// exact locations and before its prefix ones), then Prefix.
func pathRank(c model.CompareType) int {
	switch c {
	case model.CompareEqualTo:
		return 0
	case model.CompareRegex:
		return 1
	}
	return 2
}

func routeBefore(a, b keptRoute) bool {
	if ra, rb := hostRank(a.hostMatch), hostRank(b.hostMatch); ra != rb {
		return ra < rb
	}
	if ra, rb := pathRank(a.pathMatch), pathRank(b.pathMatch); ra != rb {
		return ra < rb
	}
	if len(a.path) != len(b.path) {
		return len(a.path) > len(b.path)
	}
	if a.path != b.path {
		return a.path < b.path
	}
	if a.host != b.host {
		return a.host < b.host
	}
	return olderThan(a.owner.ing, b.owner.ing)
}

// withCanary adds the route's canary to its options (a from-to-www
// redirect route has none).
func withCanary(o *model.PolicyOptions, r keptRoute) *model.PolicyOptions {
	if r.canary == nil || r.wwwTo != "" {
		return o
	}
	if o == nil {
		o = &model.PolicyOptions{}
	}
	c := *r.canary
	o.Canary = &c
	return o
}
