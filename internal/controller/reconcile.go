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
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

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
	// last is what Apply made of each load balancer it placed, and
	// lastNodes the nodes the last complete Apply placed them on (nil
	// after one that failed): Apply skips preparing again what it would
	// prepare the same. An entry counts only if the last complete Apply
	// left it (its generation is lastGen): entries are kept from one
	// Apply to the next and marked, not rebuilt, as thousands of them
	// would cost an endpoint change a map of thousands of writes.
	last      map[string]*applied
	lastNodes []source.Node
	lastGen   int
	gen       int // of the Apply under way
	prepared  int // load balancers prepared, for tests
}

// applied pairs a translated load balancer with the index entry Apply
// left for it (stored, or found unchanged), and the Apply that did.
type applied struct {
	want, stored *model.LoadBalancer
	gen          int
}

// remember records what this Apply made of want.
func (r *Reconciler) remember(want, stored *model.LoadBalancer) {
	if a := r.last[want.UUID]; a != nil {
		a.want, a.stored, a.gen = want, stored, r.gen
		return
	}
	r.last[want.UUID] = &applied{want: want, stored: stored, gen: r.gen}
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
	sameNodes := r.lastNodes != nil && reflect.DeepEqual(r.lastNodes, nodes)
	r.lastNodes = nil // until this Apply completes
	r.gen++
	if r.last == nil {
		r.last = map[string]*applied{}
	}
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
	r.lastNodes = append([]source.Node{}, nodes...)
	r.lastGen = r.gen
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
		delete(r.last, uuid)
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
		if a := r.last[want.UUID]; a != nil && sameNodes && a.gen == r.lastGen && a.want == want && a.stored == old {
			// The very load balancer placed last time, on the same nodes,
			// and the index still holds what was left for it (an
			// endpoint change, or an Ingress change elsewhere, leaves
			// every other one so): preparing it again would give the
			// same. It saves a copy and two hashes per load balancer.
			a.gen = r.gen
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

// write is one load balancer keepAll stores: lb, prepared from want,
// over old (the index's entry; nil for a new one).
type write struct{ want, old, lb *model.LoadBalancer }

// keepAll is keep for many load balancers, unchanged ones skipped, with
// as many writes at once as the store takes (store.ConcurrentWriter):
// over the network each write waits a round trip, and one at a time held
// a cold start of thousands to a few a second. The index then records
// the ones stored, in order, also when another failed: it must say what
// the store holds. The first failure is returned.
func (r *Reconciler) keepAll(ctx context.Context, writes []write) error {
	var todo []write
	for _, w := range writes {
		if w.old != nil && unchanged(w.old, w.lb) {
			r.remember(w.want, w.old)
			continue
		}
		todo = append(todo, w)
	}
	parallel := 1
	if c, ok := r.Store.(store.ConcurrentWriter); ok {
		parallel = max(1, c.WriteConcurrency())
	}
	if parallel == 1 || len(todo) < 2 {
		for _, w := range todo {
			if err := r.keep(ctx, w.want, w.old, w.lb, false); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(todo))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, w := range todo {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			if errs[i] = r.put(ctx, w.old, w.lb); errs[i] != nil {
				cancel() // the pass fails: the ones not begun need not be
			}
		}()
	}
	wg.Wait()
	var first error
	for i, w := range todo {
		if errs[i] != nil {
			if first == nil {
				first = fmt.Errorf("store load balancer %s: %w", w.lb.Name, errs[i])
			}
			continue
		}
		r.stored(w.want, w.old, w.lb)
	}
	return first
}

// put writes lb: CreateSpec when the index has no old one and the store
// has it (a new load balancer then costs one request, not a read and a
// create), otherwise PutSpec.
func (r *Reconciler) put(ctx context.Context, old, lb *model.LoadBalancer) error {
	if c, ok := r.Store.(store.Creator); ok && old == nil {
		return c.CreateSpec(ctx, lb)
	}
	return r.Store.PutSpec(ctx, lb)
}

// keep stores lb, prepared from want, unless old (the index's entry)
// already holds it, and records what this Apply made of want. members
// says that lb may differ from old in pool members alone (ApplyChanged):
// a store that can (store.MemberWriter) hands it on before it is durable.
func (r *Reconciler) keep(ctx context.Context, want, old, lb *model.LoadBalancer, members bool) error {
	if old != nil && unchanged(old, lb) {
		r.remember(want, old)
		return nil
	}
	put := func(ctx context.Context, lb *model.LoadBalancer) error { return r.put(ctx, old, lb) }
	if w, ok := r.Store.(store.MemberWriter); ok && members {
		put = w.PutMembers
	}
	if err := put(ctx, lb); err != nil {
		return fmt.Errorf("store load balancer %s: %w", lb.Name, err)
	}
	r.stored(want, old, lb)
	return nil
}

// stored records in the index and in last that lb, prepared from want
// over old, is stored.
func (r *Reconciler) stored(want, old, lb *model.LoadBalancer) {
	r.Index.put(lb)
	r.remember(want, r.Index.lbs[want.UUID])
	r.Logger.Info("load balancer stored", "lb", lb.Name, "uuid", lb.UUID, "vip", lb.VIP, "fip", lb.FIP,
		"active", lb.Placement.Active, "standby", lb.Placement.Standby, "router_id", lb.Placement.RouterID,
		"created", old == nil)
}

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
	if !r.replayed || r.lastNodes == nil || r.gen != r.lastGen || !reflect.DeepEqual(r.lastNodes, nodes) {
		return Outcome{}, false, nil
	}
	for _, want := range changed {
		a := r.last[want.UUID]
		if a == nil || a.gen != r.lastGen || r.Index.lbs[want.UUID] == nil ||
			res.AddressRefused[want.UUID] || a.want.RequestedFIP != want.RequestedFIP {
			return Outcome{}, false, nil
		}
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
			r.lastNodes = nil // as a failed Apply: the next pass is a full one
			return out, true, err
		}
	}
	return out, true, nil
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

// clusterNodes is what prepare needs of the snapshot's nodes.
type clusterNodes struct {
	placeable scheduler.Nodes
	address   map[string]string // name → address; absent when unknown
}

// nodesOf keeps the ready nodes; a cordoned one among them is marked
// draining, so the scheduler leaves it its roles but gives it no new one.
func nodesOf(nodes []source.Node, ecmp bool) clusterNodes {
	c := clusterNodes{placeable: scheduler.Nodes{Draining: map[string]bool{}, NativeECMP: ecmp}, address: map[string]string{}}
	for _, n := range nodes {
		if n.Ready {
			c.placeable.Ready = append(c.placeable.Ready, n.Name)
			if n.Draining {
				c.placeable.Draining[n.Name] = true
			}
		}
		if n.Address.IsValid() {
			c.address[n.Name] = n.Address.String()
		}
	}
	sort.Strings(c.placeable.Ready)
	return c
}

// prepare carries over what the store knows (addresses, placement,
// creation time), then assigns addresses, nodes and the pair's VRRP
// router id. The scheduler stays pure: ids and node addresses are the
// controller's, filled in after it placed.
func (r *Reconciler) prepare(want, old *model.LoadBalancer, nodes clusterNodes, load func() scheduler.Load) (*model.LoadBalancer, error) {
	r.prepared++
	lb := want.Clone()
	if old != nil {
		lb.VIP, lb.FIP, lb.Placement = old.VIP, old.FIP, old.Placement
		if !old.CreatedAt.IsZero() {
			lb.CreatedAt = old.CreatedAt
		}
	}
	if err := r.IPAM.Assign(lb); err != nil {
		return nil, err
	}
	placement, err := scheduler.Place(lb, nodes.placeable, load)
	if err != nil {
		return nil, err
	}
	if placement.RouterID, err = r.RouterIDs.Assign(lb.UUID, lb.Name, placement); err != nil {
		return nil, err
	}
	placement.ActiveAddress = nodes.address[placement.Active]
	placement.StandbyAddress = nodes.address[placement.Standby]
	if placement.Active != lb.Placement.Active || placement.Standby != lb.Placement.Standby ||
		!slices.Equal(placement.ECMP, lb.Placement.ECMP) {
		load().Add(placement) // the maps of the one count: later placements see it
	}
	lb.Placement = placement
	return lb, nil
}

// oldestFirst orders load balancers by creation time (the stored one for
// existing objects, the oldest source's for new ones), then UUID.
func oldestFirst(lbs []*model.LoadBalancer, existing map[string]*model.LoadBalancer) []*model.LoadBalancer {
	created := func(lb *model.LoadBalancer) time.Time {
		if old := existing[lb.UUID]; old != nil && !old.CreatedAt.IsZero() {
			return old.CreatedAt
		}
		return lb.CreatedAt
	}
	out := append([]*model.LoadBalancer(nil), lbs...)
	sort.SliceStable(out, func(i, j int) bool {
		ci, cj := created(out[i]), created(out[j])
		if !ci.Equal(cj) {
			return ci.Before(cj)
		}
		return out[i].UUID < out[j].UUID
	})
	return out
}

func unchanged(old, lb *model.LoadBalancer) bool {
	return old.SpecHash() == lb.SpecHash() && old.Name == lb.Name &&
		old.RequestedFIP == lb.RequestedFIP && reflect.DeepEqual(old.Sources, lb.Sources)
}

func problemsForSources(lb *model.LoadBalancer, err error) []model.Problem {
	reason := "AddressUnavailable"
	switch {
	case errors.Is(err, ipam.ErrAddressInUse):
		reason = "ExternalIPInUse"
	case errors.Is(err, ipam.ErrOutsidePool):
		reason = "ExternalIPOutsidePool"
	case errors.Is(err, ipam.ErrPoolExhausted):
		reason = "AddressPoolExhausted"
	case errors.Is(err, scheduler.ErrUnsupportedProvider):
		reason = "UnsupportedProvider"
	case errors.Is(err, routerid.ErrExhausted):
		reason = "VRRPRouterIDsExhausted"
	case errors.Is(err, ErrQuotaExceeded):
		reason = "QuotaExceeded"
	}
	var out []model.Problem
	for _, src := range lb.Sources {
		reason := reason
		if src.Kind == model.KindGateway {
			reason = gatewayReason(err)
		}
		out = append(out, model.Problem{
			Kind: src.Kind, Namespace: src.Namespace, Name: src.Name,
			Severity: model.SeverityError, Reason: reason,
			Message: fmt.Sprintf("load balancer %s not updated: %v", lb.Name, err),
		})
	}
	return out
}

// gatewayReason is the Gateway API's reason for the Programmed condition
// of a Gateway whose load balancer could not get its addresses or nodes
// (the spec's GatewayConditionReason values), which the problem carries
// so that the status pass can set it (translate.GatewayStatus.NotProgrammed).
func gatewayReason(err error) string {
	switch {
	case errors.Is(err, ipam.ErrAddressInUse), errors.Is(err, ipam.ErrOutsidePool), errors.Is(err, ipam.ErrInvalidAddress):
		return "AddressNotUsable"
	case errors.Is(err, ipam.ErrPoolExhausted):
		return "AddressNotAssigned"
	}
	return "NoResources"
}
