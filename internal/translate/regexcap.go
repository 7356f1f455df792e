package translate

import (
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// Default caps of regular-expression paths (use-regex, or a
// rewrite-target naming capture groups). HAProxy tries a load
// balancer's expressions one after another on every request of their
// class, each for up to encode.MatchLimit steps (about 25 µs at the
// limit, measured with HAProxy 2.6), in a process other tenants share: 100
// bound a request at about 2.5 ms of a HAProxy thread. A namespace's
// cap bounds what one tenant makes every check and reload of its shard
// compile.
const (
	DefaultMaxRegexPathsPerLoadBalancer = 100
	DefaultMaxRegexPathsPerNamespace    = 500
)

// capRegexPaths refuses, oldest first, each Ingress whose regular-
// expression routes would take its load balancer past
// MaxRegexPathsPerLoadBalancer or its namespace past
// MaxRegexPathsPerNamespace (0: no cap). A refused Ingress counts for
// neither, so a later, smaller one may still fit.
func capRegexPaths(parsed []*parsedIngress, opts Options) ([]*parsedIngress, []model.Problem) {
	perLB, perNS := opts.MaxRegexPathsPerLoadBalancer, opts.MaxRegexPathsPerNamespace
	if perLB <= 0 && perNS <= 0 {
		return parsed, nil
	}
	lbs, namespaces := map[string]int{}, map[string]int{}
	var kept []*parsedIngress
	var problems []model.Problem
	for _, p := range parsed {
		n := p.regexRoutes()
		if n == 0 {
			kept = append(kept, p)
			continue
		}
		uuid, _ := lbIdentity(p, opts)
		ns := p.source.Namespace
		switch {
		case perLB > 0 && lbs[uuid]+n > perLB:
			problems = append(problems, refusal(p.ing, "TooManyRegexPaths", "spec.rules",
				"%d regular-expression paths (use-regex) would give its load balancer %d, more than the %d one may hold (--max-regex-paths-per-load-balancer): "+
					"HAProxy tries each on every request, in a process other load balancers share", n, lbs[uuid]+n, perLB))
		case perNS > 0 && namespaces[ns]+n > perNS:
			problems = append(problems, refusal(p.ing, "TooManyRegexPaths", "spec.rules",
				"%d regular-expression paths (use-regex) would give namespace %s %d, more than the %d one may hold (--max-regex-paths-per-namespace)",
				n, ns, namespaces[ns]+n, perNS))
		default:
			lbs[uuid] += n
			namespaces[ns] += n
			kept = append(kept, p)
		}
	}
	return kept, problems
}

// regexRoutes counts the Ingress's routes that are regular expressions.
func (p *parsedIngress) regexRoutes() int {
	n := 0
	for _, r := range p.routes {
		if r.pathMatch == model.CompareRegex {
			n++
		}
	}
	return n
}

// regexCapMayBite: some namespace or shared group of snapshot Ingresses
// of ours may hold more regular-expression paths than a load balancer
// may. Below that no Ingress is refused by capRegexPaths, whose
// decisions cross load balancers (a namespace's count, the oldest
// first), so a translation of some Ingresses only is exact.
// mayHoldRegexPaths over-counts: every path of an Ingress annotated
// use-regex or rewrite-target, twice with from-to-www-redirect.
func regexCapMayBite(ings []*networkingv1.Ingress, classes classSet, opts Options) bool {
	limit := opts.MaxRegexPathsPerLoadBalancer
	if limit <= 0 || (opts.MaxRegexPathsPerNamespace > 0 && opts.MaxRegexPathsPerNamespace < limit) {
		limit = opts.MaxRegexPathsPerNamespace
	}
	if limit <= 0 {
		return false
	}
	counts := map[string]int{}
	for _, ing := range ings {
		n := mayHoldRegexPaths(ing)
		if n == 0 || !classes.owns(ing, opts) {
			continue
		}
		keys := []string{"namespace " + ing.Namespace}
		if g := ing.Annotations[annotation.LoadBalancer]; g != "" {
			keys = append(keys, "group "+g) // shared across namespaces or not
		}
		for _, k := range keys {
			if counts[k] += n; counts[k] > limit {
				return true
			}
		}
	}
	return false
}

func mayHoldRegexPaths(ing *networkingv1.Ingress) int {
	has := func(name string) bool {
		_, a := ing.Annotations[annotation.Prefix+name]
		_, b := ing.Annotations[annotation.NginxPrefix+name]
		return a || b
	}
	if !has("use-regex") && !has("rewrite-target") {
		return 0
	}
	n := 0
	for _, rule := range ing.Spec.Rules {
		if rule.HTTP != nil {
			n += len(rule.HTTP.Paths)
		}
	}
	if has("from-to-www-redirect") {
		n *= 2
	}
	return n
}
