package gatewayapi

import (
	"encoding/json"
	"fmt"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// maxSplitRefs bounds the backendRefs of a rule whose refs carry
// filters (the CRD's maximum, render's split bound).
const maxSplitRefs = 16

// refFilters are one backendRef's filters: its RequestHeaderModifier
// (the Gateway API's HTTPRouteBackendRequestHeaderModification) and its
// URLRewrite's path (HTTPRouteBackendURLRewrite), each backend-level
// http-request rules of a pool of its own.
type refFilters struct {
	headers []model.HeaderOp
	// rewritePath replaces the path (ReplaceFullPath); prefixRewrite the
	// rule's matched prefix (ReplacePrefixMatch). At most one is set.
	rewritePath   string
	prefixRewrite *model.PrefixRewrite
}

func (f refFilters) empty() bool {
	return len(f.headers) == 0 && f.rewritePath == "" && f.prefixRewrite == nil
}

// parseRefFilters validates the filters of one backendRef of a rule
// (its matches and filters already parsed). RequestHeaderModifier and
// URLRewrite's path are served there, each once; any other type, and a
// URLRewrite hostname, refuse the route, as on a rule.
func parseRefFilters(field string, fs []gwv1.HTTPRouteFilter, rule gwRule) (refFilters, *routeRefusal) {
	var out refFilters
	seen := map[gwv1.HTTPRouteFilterType]bool{}
	for i, f := range fs {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case f.Type != gwv1.HTTPRouteFilterRequestHeaderModifier && f.Type != gwv1.HTTPRouteFilterURLRewrite:
			return out, &routeRefusal{at, fmt.Sprintf("filter type %s is not supported on a backendRef (RequestHeaderModifier, URLRewrite)",
				translate.Quote(string(f.Type)))}
		case seen[f.Type]:
			return out, &routeRefusal{at, fmt.Sprintf("a second %s filter", translate.Quote(string(f.Type)))}
		case f.Type == gwv1.HTTPRouteFilterRequestHeaderModifier && f.RequestHeaderModifier == nil,
			f.Type == gwv1.HTTPRouteFilterURLRewrite && f.URLRewrite == nil:
			return out, &routeRefusal{at, fmt.Sprintf("type %s without its settings", translate.Quote(string(f.Type)))}
		}
		seen[f.Type] = true
		if f.Type == gwv1.HTTPRouteFilterURLRewrite {
			if refusal := out.parseRefRewrite(at+".urlRewrite", f.URLRewrite, rule); refusal != nil {
				return out, refusal
			}
			continue
		}
		ops, err := headerOps(f.RequestHeaderModifier)
		if err != nil {
			return out, &routeRefusal{at + ".requestHeaderModifier", err.Error()}
		}
		out.headers = ops
	}
	return out, nil
}

// parseRefRewrite reads a backendRef's URLRewrite: a path only (a
// hostname is refused: the Host of one ref's requests is not served), on
// a rule that does not change the path itself (two rewrites of one path
// would each see a path the route did not write). ReplacePrefixMatch
// replaces the rule's matched prefix, so the rule's matches are
// PathPrefix ones of one prefix: a pool cannot tell which of several
// prefixes routed a request to it.
func (out *refFilters) parseRefRewrite(at string, f *gwv1.HTTPURLRewriteFilter, rule gwRule) *routeRefusal {
	if f.Hostname != nil {
		return &routeRefusal{at + ".hostname", "a hostname rewrite is not supported on a backendRef (path only; a rule's URLRewrite takes a hostname)"}
	}
	if f.Path == nil {
		return &routeRefusal{at, "no path to rewrite"}
	}
	if rule.filters.rewritePath != nil || rule.filters.redirect != nil {
		return &routeRefusal{at, "the rule's own filters already rewrite or redirect the path"}
	}
	p, err := parsePathModifier(f.Path)
	if err != nil {
		return &routeRefusal{at + ".path", err.Error()}
	}
	if p.prefix == nil {
		out.rewritePath = p.full
		return nil
	}
	prefix := ""
	for j, m := range rule.matches {
		if m.pathMatch != model.CompareStartsWith {
			return &routeRefusal{at + ".path", fmt.Sprintf("matches[%d]: ReplacePrefixMatch needs a PathPrefix match", j)}
		}
		v := strings.TrimSuffix(m.path, "/") // "/" is ""
		if _, err := translate.PlainPath("path prefix", m.path); err != nil {
			return &routeRefusal{at + ".path", fmt.Sprintf("matches[%d]: ReplacePrefixMatch: %v", j, err)}
		}
		if j > 0 && v != prefix {
			return &routeRefusal{at + ".path", fmt.Sprintf(
				"matches[%d]: ReplacePrefixMatch on a backendRef needs the rule's matches to share one prefix (the backend cannot tell which matched)", j)}
		}
		prefix = v
	}
	out.prefixRewrite = &model.PrefixRewrite{Prefix: prefix, Replacement: *p.prefix}
	return nil
}

// parseRuleRefFilters reads the filters of each backendRef of a rule:
// nil when none has any.
func parseRuleRefFilters(field string, refs []gwv1.HTTPBackendRef, rule gwRule) ([]refFilters, *routeRefusal) {
	var out []refFilters
	for j, b := range refs {
		if len(b.Filters) == 0 {
			continue
		}
		if len(refs) > maxSplitRefs {
			return nil, &routeRefusal{field + ".backendRefs", fmt.Sprintf("%d backendRefs with filters, pier serves at most %d", len(refs), maxSplitRefs)}
		}
		f, refusal := parseRefFilters(fmt.Sprintf("%s.backendRefs[%d].filters", field, j), b.Filters, rule)
		if refusal != nil {
			return nil, refusal
		}
		if out == nil {
			out = make([]refFilters, len(refs))
		}
		out[j] = f
	}
	return out, nil
}

// withRefFilters is pool with a backendRef's filters: a pool of its own
// (the ID a hash of the pool's and the filters), so that the Service's
// pool, which Ingresses and other rules share, is unchanged. Two refs
// asking the same of one Service share it.
func withRefFilters(pool *model.Pool, f refFilters) *model.Pool {
	if pool == nil || f.empty() {
		return pool
	}
	p := *pool
	if f.rewritePath == "" && f.prefixRewrite == nil {
		b, _ := json.Marshal(f.headers) // plain fields: cannot fail
		p.ID = model.ID("gateway-ref-headers", pool.ID, string(b))
	} else {
		b, _ := json.Marshal([]any{f.headers, f.rewritePath, f.prefixRewrite})
		p.ID = model.ID("gateway-ref-filters", pool.ID, string(b))
	}
	p.Name = p.Namespace + "_ref_" + p.ID[:8]
	p.RequestHeaders, p.RewritePath, p.PrefixRewrite = f.headers, f.rewritePath, f.prefixRewrite
	return &p
}

// servicePool is one resolved backendRef's pool: the Service's, which
// Ingresses and other routes share, or one of its own with the ref's
// filters.
func servicePool(w weighted) *model.Pool {
	port := fmt.Sprint(w.port)
	pool := &model.Pool{ID: model.ID("pool", w.ns, w.svc, port), Name: w.ns + "_" + w.svc + "_" + port,
		Namespace: w.ns, Service: w.svc, Port: port, Algorithm: model.AlgorithmRoundRobin, Members: w.members}
	if w.h2c {
		pool = h2cPool(pool)
	}
	pool = withBackendTLS(pool, w.tls)
	return withRefFilters(pool, w.filters)
}

// anyFilters reports whether a resolved backendRef has filters.
func anyFilters(ws []weighted) bool {
	for _, w := range ws {
		if !w.filters.empty() {
			return true
		}
	}
	return false
}

// splitOfWeighted gives each resolved backendRef of a rule a pool of its
// own (its header changes are backend rules, which HAProxy runs before
// it picks a member, so refs cannot share one pool as a weighted rule's
// Services otherwise do) and the policy a split choosing one by weight;
// fail of the total (refs that do not resolve) is answered 500.
func splitOfWeighted(ws []weighted, fail int) (*model.Split, []*model.Pool) {
	split := &model.Split{FailWeight: fail}
	pools := make([]*model.Pool, 0, len(ws))
	for _, w := range ws {
		p := servicePool(w)
		pools = append(pools, p)
		split.Pools = append(split.Pools, model.PoolShare{PoolID: p.ID, Weight: int(w.weight)})
	}
	return split, pools
}

// withSplit adds a rule's split to a policy's options (nil without
// filters), in a copy: entries of one rule share the filters' lists.
func withSplit(o *model.PolicyOptions, s *model.Split) *model.PolicyOptions {
	if s == nil {
		return o
	}
	var out model.PolicyOptions
	if o != nil {
		out = *o
	}
	shares := make([]model.PoolShare, len(s.Pools))
	copy(shares, s.Pools)
	out.Split = &model.Split{Pools: shares, FailWeight: s.FailWeight}
	return &out
}
