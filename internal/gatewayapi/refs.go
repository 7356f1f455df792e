package gatewayapi

import (
	"encoding/json"
	"fmt"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// maxSplitRefs bounds the backendRefs of a rule whose refs carry
// filters (the CRD's maximum, render's split bound).
const maxSplitRefs = 16

// parseRefFilters validates the filters of one backendRef. Only
// RequestHeaderModifier is served there (the Gateway API's
// HTTPRouteBackendRequestHeaderModification): a backend-level
// http-request rule in a pool of its own. Any other type refuses the
// route, as on a rule.
func parseRefFilters(field string, fs []gwv1.HTTPRouteFilter) ([]model.HeaderOp, *routeRefusal) {
	var out []model.HeaderOp
	for i, f := range fs {
		at := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case f.Type != gwv1.HTTPRouteFilterRequestHeaderModifier:
			return nil, &routeRefusal{at, fmt.Sprintf("filter type %s is not supported on a backendRef (RequestHeaderModifier)",
				translate.Quote(string(f.Type)))}
		case out != nil:
			return nil, &routeRefusal{at, fmt.Sprintf("a second %s filter", translate.Quote(string(f.Type)))}
		case f.RequestHeaderModifier == nil:
			return nil, &routeRefusal{at, fmt.Sprintf("type %s without its settings", translate.Quote(string(f.Type)))}
		}
		ops, err := headerOps(f.RequestHeaderModifier)
		if err != nil {
			return nil, &routeRefusal{at + ".requestHeaderModifier", err.Error()}
		}
		out = ops
	}
	return out, nil
}

// parseRuleRefFilters reads the filters of each backendRef of a rule:
// nil when none has any.
func parseRuleRefFilters(field string, refs []gwv1.HTTPBackendRef) ([][]model.HeaderOp, *routeRefusal) {
	var out [][]model.HeaderOp
	for j, b := range refs {
		if len(b.Filters) == 0 {
			continue
		}
		if len(refs) > maxSplitRefs {
			return nil, &routeRefusal{field + ".backendRefs", fmt.Sprintf("%d backendRefs with filters, pier serves at most %d", len(refs), maxSplitRefs)}
		}
		ops, refusal := parseRefFilters(fmt.Sprintf("%s.backendRefs[%d].filters", field, j), b.Filters)
		if refusal != nil {
			return nil, refusal
		}
		if out == nil {
			out = make([][]model.HeaderOp, len(refs))
		}
		out[j] = ops
	}
	return out, nil
}

// withRequestHeaders is pool with a backendRef's header changes: a pool
// of its own (the ID a hash of the pool's and the changes), so that the
// Service's pool, which Ingresses and other rules share, is unchanged.
// Two refs asking the same of one Service share it.
func withRequestHeaders(pool *model.Pool, ops []model.HeaderOp) *model.Pool {
	if pool == nil || len(ops) == 0 {
		return pool
	}
	b, _ := json.Marshal(ops) // plain fields: cannot fail
	p := *pool
	p.ID = model.ID("gateway-ref-headers", pool.ID, string(b))
	p.Name = p.Namespace + "_ref_" + p.ID[:8]
	p.RequestHeaders = ops
	return &p
}

// servicePool is one resolved backendRef's pool: the Service's, which
// Ingresses and other routes share, or one of its own with the ref's
// header changes.
func servicePool(w weighted) *model.Pool {
	port := fmt.Sprint(w.port)
	pool := &model.Pool{ID: model.ID("pool", w.ns, w.svc, port), Name: w.ns + "_" + w.svc + "_" + port,
		Namespace: w.ns, Service: w.svc, Port: port, Algorithm: model.AlgorithmRoundRobin, Members: w.members}
	if w.h2c {
		pool = h2cPool(pool)
	}
	pool = withBackendTLS(pool, w.tls)
	return withRequestHeaders(pool, w.headers)
}

// anyHeaders reports whether a resolved backendRef has header changes.
func anyHeaders(ws []weighted) bool {
	for _, w := range ws {
		if len(w.headers) > 0 {
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
