// Package controller is the kube-manager role after translation: it gives
// each desired LoadBalancer its addresses (IPAM) and nodes (scheduler),
// and makes the store hold exactly the desired set. It runs the same in
// pier run and in the Kubernetes controller; only the store differs.
package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/routerid"
	"pier.dev/pier/internal/scheduler"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/translate"
)

// Reconciler applies translation results to a store. It is not safe for
// concurrent use: one goroutine (the leader's) owns it.
type Reconciler struct {
	Store store.Store
	// Index is what the store holds; Apply reads it instead of the store
	// and records in it what it writes.
	Index *Index
	IPAM  *ipam.Allocator
	// RouterIDs numbers the VRRP instances of node pairs; nil: a new
	// allocator over routerid.DefaultRange.
	RouterIDs *routerid.Allocator
	// Quota caps each namespace (quota.go); zero: none.
	Quota Quota
	// NativeECMP places native load balancers on every ready node (the
	// agents advertise them with equal preference over BGP) instead of
	// an active/standby pair.
	NativeECMP bool
	Logger     *slog.Logger

	replayed bool
	// last remembers the passes: Apply skips preparing again what it
	// would prepare the same, and ApplyChanged may stand for it.
	last     lastApply
	prepared int // load balancers prepared, for tests
}

// Outcome is what Apply or ApplyChanged made of a result.
type Outcome struct {
	// Problems are those of the load balancers refused their addresses,
	// nodes, VRRP router id or quota.
	Problems []model.Problem
	// Refused are the sources of the new load balancers that were not
	// created (for those problems, or for addresses translation refused,
	// res.AddressRefused): they are not served, so not accepted
	// (translate.Result.Without). An existing load balancer refused a
	// change keeps its stored spec, and its sources are not refused.
	Refused []model.ObjectRef
}

// Apply makes the store match res, placing load balancers on nodes (the
// nodes of the snapshot res was translated from; only ready ones are
// placed on). Load balancers that could not get their addresses or their
// VRRP router id are reported as problems, and the sources of the new
// ones among them as refused; a LoadBalancer that already exists keeps
// its stored spec in that case, so a refused change never disturbs what
// serves. res is left as it was, and nothing is read from the store.
func (r *Reconciler) Apply(ctx context.Context, res *translate.Result, nodes []source.Node) (Outcome, error) {
	sameNodes := r.last.begin(nodes)
	if r.RouterIDs == nil || !r.replayed {
		r.replay(r.Index.List())
	}
	// The work below is linear in the load balancers, without a sort of
	// them all: with thousands stored, one new Ingress must not pay for
	// ordering every other one.
	existing := maps.Clone(r.Index.ByUUID())
	// The load of each node is counted when a placement first chooses
	// among nodes (scheduler.Place): a change to load balancers that keep
	// their nodes (an endpoint change) counts none.
	load := lazyLoad(existing)
	// Deletions first: addresses freed by a load balancer that is gone
	// are available to the ones created in this same pass.
	if err := r.deleteGone(ctx, res.LoadBalancers, existing, load); err != nil {
		return Outcome{}, err
	}
	todo, refused := r.toPrepare(res, existing, sameNodes)
	out := Outcome{Refused: refused}
	writes := r.prepareAll(todo, existing, nodesOf(nodes, r.NativeECMP), load, &out)
	if err := r.keepAll(ctx, writes); err != nil {
		return out, err
	}
	r.last.completed(nodes)
	return out, nil
}

// deleteGone deletes the load balancers of existing that wanted lacks,
// and removes them from existing.
func (r *Reconciler) deleteGone(ctx context.Context, wanted []*model.LoadBalancer, existing map[string]*model.LoadBalancer, load func() scheduler.Load) error {
	var gone []string
	if stays := countStored(wanted, existing); stays < len(existing) {
		desired := make(map[string]bool, len(wanted))
		for _, want := range wanted {
			desired[want.UUID] = true
		}
		for uuid := range existing {
			if !desired[uuid] {
				gone = append(gone, uuid)
			}
		}
		slices.Sort(gone)
	}
	if len(gone) > 0 {
		// Counted before the deletions, as Apply always counted: the load
		// balancers that go still weigh on placements in this pass.
		load()
	}
	for _, uuid := range gone {
		lb := existing[uuid]
		if err := r.Store.Delete(ctx, uuid); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("delete load balancer %s: %w", lb.Name, err)
		}
		r.Index.remove(uuid)
		r.last.forget(uuid)
		r.IPAM.Release(uuid)
		r.RouterIDs.Release(uuid)
		delete(existing, uuid)
		r.Logger.Info("load balancer deleted", "lb", lb.Name, "uuid", uuid, "vip", lb.VIP, "fip", lb.FIP)
	}
	return nil
}

// toPrepare returns the load balancers of res that must be prepared
// again, and the sources of the new ones whose addresses translation
// refused (res.AddressRefused).
func (r *Reconciler) toPrepare(res *translate.Result, existing map[string]*model.LoadBalancer, sameNodes bool) (todo []*model.LoadBalancer, refused []model.ObjectRef) {
	for _, want := range res.LoadBalancers {
		old := existing[want.UUID]
		if res.AddressRefused[want.UUID] {
			// Translation refused the addresses it asks for and said
			// why: as for an address IPAM refuses, what serves stays.
			if old == nil {
				refused = appendSources(refused, want)
			}
			continue
		}
		if r.last.placedAsIs(want, old, sameNodes) {
			// The very load balancer placed last time, on the same nodes,
			// and the index still holds what was left for it (an
			// endpoint change, or an Ingress change elsewhere, leaves
			// every other one so): preparing it again would give the
			// same. It saves a copy and two hashes per load balancer.
			continue
		}
		todo = append(todo, want)
	}
	return todo, refused
}

// prepareAll prepares todo, oldest first: when two new load balancers
// pin the same floating IP, the older Ingress gets it, whatever their
// UUIDs. What it refuses goes to out. The writes wait until every one
// is prepared: then they can run at once (keepAll).
func (r *Reconciler) prepareAll(todo []*model.LoadBalancer, existing map[string]*model.LoadBalancer, cluster clusterNodes, load func() scheduler.Load, out *Outcome) []write {
	// Quota usage matters only to new load balancers: counted once one
	// comes (a change to existing ones, an endpoint change, skips it).
	var used *usage
	var writes []write
	for _, want := range oldestFirst(todo, existing) {
		old := existing[want.UUID]
		var err error
		if old == nil {
			if used == nil {
				u := usageOf(existing)
				used = &u
			}
			err = r.Quota.admit(*used, want, r.IPAM.HasPublicPool() || want.RequestedFIP != "")
		}
		var lb *model.LoadBalancer
		if err == nil {
			lb, err = r.prepare(want, old, cluster, load)
		}
		if err != nil {
			out.Problems = append(out.Problems, problemsForSources(want, err)...)
			if old == nil {
				out.Refused = appendSources(out.Refused, want)
			}
			continue
		}
		if old == nil {
			used.add(lb) // counted above: old == nil
		}
		writes = append(writes, write{want: want, old: old, lb: lb})
	}
	return writes
}

// appendSources appends the refs of lb's sources to refs.
func appendSources(refs []model.ObjectRef, lb *model.LoadBalancer) []model.ObjectRef {
	for _, src := range lb.Sources {
		refs = append(refs, src.Ref())
	}
	return refs
}

// lazyLoad returns the nodes' load over lbs, counted on its first call
// (scheduler.Place calls it only to choose among nodes) and shared by
// every later one, so that placements see each other's Add.
func lazyLoad(lbs map[string]*model.LoadBalancer) func() scheduler.Load {
	var counted *scheduler.Load
	return func() scheduler.Load {
		if counted == nil {
			l := scheduler.LoadOf(slices.Collect(maps.Values(lbs)))
			counted = &l
		}
		return *counted
	}
}

// countStored counts the UUIDs of lbs (sorted by UUID, as translation
// gives them) that existing holds: as many as existing has means none of
// those is gone, without a set of every wanted UUID.
func countStored(lbs []*model.LoadBalancer, existing map[string]*model.LoadBalancer) int {
	n := 0
	for i, lb := range lbs {
		if i > 0 && lbs[i-1].UUID == lb.UUID {
			continue
		}
		if _, ok := existing[lb.UUID]; ok {
			n++
		}
	}
	return n
}

// replay claims, once, what the stored load balancers hold before any new
// assignment, so a restart never hands an address to someone else nor
// renumbers a live pair (metallb's rule).
func (r *Reconciler) replay(stored []*model.LoadBalancer) {
	if r.RouterIDs == nil {
		r.RouterIDs = routerid.New(routerid.DefaultRange)
	}
	if r.replayed {
		return
	}
	for _, err := range r.IPAM.Replay(stored) {
		r.Logger.Warn("address conflict in stored load balancers", "error", err)
	}
	for _, err := range r.RouterIDs.Replay(stored) {
		r.Logger.Warn("VRRP router id conflict in stored load balancers", "error", err)
	}
	r.replayed = true
}
