package controller

import (
	"context"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// ApplyChanged is Apply for a result that differs from the one the last
// complete Apply was given only in changed: load balancers that keep
// their UUIDs, Sources and requested addresses, with other members
// (translate.EndpointMembers' patched ones). Only those are prepared
// again; Apply would skip every other one, as the last Apply left it,
// and delete none. The pass is linear in changed, not in the load
// balancers stored: at 3,000, Apply's pass over them all was most of an
// endpoint change's time in the pipeline.
//
// Apply would prepare the others again only if their index entries
// changed since (an agent's report replaces one), and find them
// unchanged: it would write nothing for them.
//
// ok is false, and nothing was done, when that cannot be known to give
// what Apply would: the nodes changed, the last Apply failed, or one of
// changed was not placed by the last Apply or is no longer stored (new,
// refused, deleted since). The caller then calls Apply.
func (r *Reconciler) ApplyChanged(ctx context.Context, res *translate.Result, nodes []source.Node, changed []*model.LoadBalancer) (out Outcome, ok bool, err error) {
	stored := func(uuid string) bool { return r.Index.lbs[uuid] != nil }
	if !r.replayed || !r.last.covers(res, nodes, changed, stored) {
		return Outcome{}, false, nil
	}
	cluster := nodesOf(nodes, r.NativeECMP)
	load := lazyLoad(r.Index.lbs)
	for _, want := range oldestFirst(changed, r.Index.lbs) {
		old := r.Index.lbs[want.UUID]
		lb, err := r.prepare(want, old, cluster, load)
		if err != nil {
			// old serves on: as in Apply, a refused change of an
			// existing load balancer leaves its stored spec, and its
			// sources are not refused.
			out.Problems = append(out.Problems, problemsForSources(want, err)...)
			continue
		}
		if err := r.keep(ctx, want, old, lb, true); err != nil {
			r.last.failed() // as a failed Apply: the next pass is a full one
			return out, true, err
		}
	}
	return out, true, nil
}
