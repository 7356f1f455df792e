// Package pipeline is the controller's loop, shared by `pier run` and
// `pier controller`: each snapshot is classified, and only a change that
// matters is translated, reconciled into the store (IPAM, scheduler), its
// problems recorded, and the Ingress status decided from what agents
// report. One goroutine does all of it (Contour's rule), so nothing else
// writes load-balancer specs.
//
// The loop never re-reads what it was sent: the store watch's payloads
// feed one in-memory index of load balancers (controller.Index), which the
// reconciler and the status pass read and the reconciler updates with what
// it writes. The store is read once, when the loop starts. Where status
// and problems go is pluggable: memory for pier run, the API server for
// the controller.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/routerid"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/translate"
)

// StatusSink is where status goes. Implementations dispatch on the ref's
// kind (Ingress today; Service and Gateway later).
type StatusSink interface {
	// Current returns what the objects of snap publish now.
	Current(snap *source.Snapshot) status.Published
	// Publish makes every object in ours publish next[ref] (nothing when
	// absent). Implementations skip objects whose status already equals.
	Publish(ctx context.Context, snap *source.Snapshot, ours map[model.ObjectRef]bool, next status.Published) error
}

// GatewayStatusSink is implemented by sinks that write the Gateway API's
// status (the API server's writer): the conditions, listeners, addresses
// and route parents of every GatewayClass, Gateway and HTTPRoute of ours,
// already completed by status.Gateways. Implementations skip objects
// whose status already equals and leave other controllers' entries.
type GatewayStatusSink interface {
	PublishGateways(ctx context.Context, snap *source.Snapshot, st *translate.GatewayStatus) error
}

// StatusReader is implemented by sinks that hold the status themselves
// (pier run's memory); the API then shows it instead of the snapshot's.
type StatusReader interface {
	Published(ref model.ObjectRef) []networkingv1.IngressLoadBalancerIngress
}

// Pipeline turns snapshots into stored LoadBalancers and Ingress status.
type Pipeline struct {
	Store store.Store
	IPAM  *ipam.Allocator
	// RouterIDs numbers the VRRP instances of node pairs; nil: the whole
	// range 1-255.
	RouterIDs *routerid.Allocator
	// Quota caps each namespace's load balancers and floating IPs.
	Quota controller.Quota
	// NativeECMP places native load balancers on every ready node
	// (controller.Reconciler).
	NativeECMP bool
	Translate  translate.Options
	Addresses  status.Addresses
	Status     StatusSink
	// Problems, if set, receives the problems new in each rebuild; every
	// problem is also logged once and kept in Book.
	Problems ProblemSink
	Book     *ProblemBook
	Metrics  *metrics.Metrics
	Logger   *slog.Logger
	// Observe, if set, sees each snapshot before anything is stored, so
	// readers of the snapshot (the agent's Secrets in pier run) are never
	// older than the load balancers that refer to it.
	Observe func(*source.Snapshot)

	snaps chan *source.Snapshot
	once  sync.Once

	// Owned by Run's goroutine.
	index      *controller.Index
	reconciler *controller.Reconciler
	// result is what the last rebuild published from: its translation
	// less what the reconciler refused.
	result *translate.Result
	// last is what the next rebuild is derived from (lastRebuild).
	last lastRebuild
	// storeChangedBehindUs: someone else changed or deleted a load
	// balancer since the last rebuild.
	storeChangedBehindUs bool
	// statusOwed: a rebuild left its status pass to Run's paced one
	// (rebuild, endpoint changes).
	statusOwed bool

	mu     sync.Mutex
	ready  bool
	snap   *source.Snapshot // the last snapshot seen
	gwView *gatewayView     // the Gateway API status of the last status pass
	// gwViewOf is what gwView was computed from (Run's goroutine only).
	gwViewOf gatewayViewKey
}

func (p *Pipeline) init() {
	p.once.Do(func() {
		p.snaps = make(chan *source.Snapshot, 1)
		if p.Book == nil {
			p.Book = NewProblemBook(p.Logger)
		}
	})
}

// Offer hands over a new snapshot. Only the latest matters: one not yet
// processed is replaced. Safe to call from any goroutine.
func (p *Pipeline) Offer(snap *source.Snapshot) {
	p.init()
	for {
		select {
		case p.snaps <- snap:
			return
		default:
		}
		select {
		case <-p.snaps:
		default:
		}
	}
}

// openStore watches the store, then builds the index and the reconciler
// from one read of it.
func (p *Pipeline) openStore(ctx context.Context) (<-chan store.Event, error) {
	events, err := p.Store.Watch(ctx)
	if err != nil {
		return nil, fmt.Errorf("watch store: %w", err)
	}
	// The one read of the store: the watch replays it too, but the first
	// rebuild must not start before the index knows every allocation.
	lbs, err := p.Store.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("list load balancers: %w", err)
	}
	p.index = controller.NewIndex(lbs)
	p.reconciler = &controller.Reconciler{Store: p.Store, Index: p.index, IPAM: p.IPAM, RouterIDs: p.RouterIDs,
		Quota: p.Quota, NativeECMP: p.NativeECMP, Logger: p.Logger}
	return events, nil
}

// Ready reports an error until the first snapshot has been processed.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return fmt.Errorf("first rebuild not done")
	}
	return nil
}

// Run processes snapshots and store events until ctx ends.
func (p *Pipeline) Run(ctx context.Context) error {
	p.init()
	events, err := p.openStore(ctx)
	if err != nil {
		return err
	}
	// Store events are applied to the index at once; the status pass they
	// call for runs at once too, unless one ran less than storePassEvery
	// ago: then it runs when that time is up, with every event that came
	// meanwhile (paced, see storePassEvery). A pass a rebuild owes
	// (statusOwed) runs storePassEvery after it, or with the first store
	// event that calls for one.
	var (
		held     controller.Change
		due      <-chan time.Time
		lastPass time.Time
		// indexDue: the indexes an endpoint change uses are built once
		// the pipeline has been idle for indexWhenIdle (indexForEndpoints).
		indexDue <-chan time.Time
	)
	pass := func() error {
		change := held
		if p.statusOwed {
			change = max(change, controller.StatusChanged)
		}
		held, due, lastPass, p.statusOwed = controller.Unchanged, nil, time.Now(), false
		return p.storeChanged(ctx, change)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case snap := <-p.snaps:
			if err := p.take(ctx, snap); err != nil {
				return err
			}
			if p.statusOwed && due == nil {
				due = time.After(storePassEvery)
			}
			indexDue = nil
			if !p.indexedForEndpoints() {
				indexDue = time.After(indexWhenIdle)
			}
		case ev, ok := <-events:
			if !ok {
				return nil
			}
			held = max(held, p.applyEvents(ev, events))
			if held == controller.Unchanged {
				// The echo of our own writes: nothing for a pass, and an
				// owed one keeps its time.
				continue
			}
			if wait := storePassEvery - time.Since(lastPass); wait > 0 {
				if due == nil {
					due = time.After(wait)
				}
				continue
			}
			if err := pass(); err != nil {
				return err
			}
		case <-due:
			if err := pass(); err != nil {
				return err
			}
		case <-indexDue:
			indexDue = nil
			p.mu.Lock()
			snap := p.snap
			p.mu.Unlock()
			p.indexForEndpoints(snap)
		}
	}
}

// indexWhenIdle is how long the pipeline waits after a snapshot before
// it builds what the next endpoint change needs (indexForEndpoints): a
// burst of changes builds them once, after it.
const indexWhenIdle = 100 * time.Millisecond

// indexedForEndpoints reports whether the indexes an endpoint change uses
// are those of the last result and snapshot.
func (p *Pipeline) indexedForEndpoints() bool { return p.last.indexed(p.snap) }

// indexForEndpoints builds, when Run is idle, what an endpoint change of
// snap needs (lastRebuild.index).
func (p *Pipeline) indexForEndpoints(snap *source.Snapshot) { p.last.index(snap) }

// storePassEvery paces the status passes that store events call for. A
// pass decides what every Ingress publishes (a few milliseconds at 3,000),
// and agents report one load balancer at a time: one pass per report made
// a cold start of 3,000 load balancers publish about 300 statuses a
// second, 8 s after the data plane served them all. A report that comes
// after a quiet spell still gets its pass at once.
const storePassEvery = 25 * time.Millisecond

// applyEvents takes ev and every event already queued into the index.
func (p *Pipeline) applyEvents(ev store.Event, events <-chan store.Event) controller.Change {
	change := p.index.Apply(ev)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return change
			}
			change = max(change, p.index.Apply(ev))
		default:
			return change
		}
	}
}

// storeChanged reacts to store events: an agent's report decides status
// and needs no rebuild. A load balancer someone else changed or deleted
// is put back by the next rebuild, which the next snapshot brings however
// little it changed (as when every snapshot rebuilt). Not at once: this
// replica's snapshot may be older than the store (a leader resumed after a
// pause, whose successor wrote meanwhile), and the informers catch up
// before the next snapshot.
func (p *Pipeline) storeChanged(ctx context.Context, change controller.Change) error {
	if p.result == nil || change == controller.Unchanged {
		return nil
	}
	if change == controller.SpecChanged {
		// The next rebuild puts it back, translating everything: the
		// last translation no longer says what the store holds.
		p.storeChangedBehindUs = true
		p.last.forget()
	}
	p.mu.Lock()
	snap := p.snap
	p.mu.Unlock()
	return p.statusPass(ctx, snap, "store")
}

// take classifies a new snapshot and does what it calls for.
func (p *Pipeline) take(ctx context.Context, snap *source.Snapshot) error {
	p.mu.Lock()
	prev := p.snap
	p.mu.Unlock()
	p.last.advance(prev, snap)
	e := classify(prev, snap, p.last.refs, p.Addresses.Service)
	if e.rebuild == "" && p.storeChangedBehindUs {
		e.rebuild = ReasonLoadBalancer
	}
	if p.Observe != nil {
		p.Observe(snap)
	}
	var err error
	effect := "none"
	switch {
	case e.rebuild != "":
		effect, err = "rebuild", p.rebuild(ctx, prev, snap, e)
	case e.status:
		effect, err = "status", p.statusPass(ctx, snap, "source")
	}
	// Readers (the API, the web view) get the snapshot only once its
	// effect is complete, so a new Ingress is never shown without the
	// problems its rebuild found; the counter then says it is complete.
	p.mu.Lock()
	p.snap = snap
	p.mu.Unlock()
	p.Metrics.Snapshots.WithLabelValues(effect).Inc()
	return err
}

// rebuild translates snap and reconciles the store with it. How it
// translates is lastRebuild's choice (translate): when e says that only
// the endpoints of some Services changed since prev, their members are
// patched into the last translation; when only Ingresses did, the load
// balancers of those Ingresses alone are translated again; either only
// when that gives the same result as translating everything again.
func (p *Pipeline) rebuild(ctx context.Context, prev, snap *source.Snapshot, e effect) error {
	start := time.Now()
	p.storeChangedBehindUs = false
	opts := p.Translate
	opts.Now = start
	c := p.last.translate(prev, snap, e, opts)
	applied, err := p.reconcile(ctx, c, snap.Nodes)
	if err != nil {
		p.last.forget()
		return err
	}
	p.last.keep(snap, c, applied, p.Translate.DefaultCertificate)
	res := c.res.Without(applied.Refused)
	res.Gateway.NotProgrammed(applied.Problems)
	problems := slices.Concat(res.Problems, applied.Problems)
	fresh := p.Book.Update(problems)
	if p.Problems != nil {
		p.Problems.Report(ctx, snap, fresh)
	}
	p.result = res
	p.mu.Lock()
	p.ready = true
	p.mu.Unlock()
	p.Metrics.Rebuilds.WithLabelValues(e.rebuild).Inc()
	p.Metrics.RebuildSeconds.Observe(time.Since(start).Seconds())
	countProblems(p.Metrics, problems)
	p.Logger.Debug("rebuilt", "reason", e.rebuild, "incremental", c.incremental(), "ingresses", len(res.Ours), "accepted", len(res.Accepted),
		"load_balancers", len(res.LoadBalancers), "problems", len(problems), "took", time.Since(start))
	if e.rebuild == ReasonInitial {
		p.logFirstTranslation(snap, res, len(problems), time.Since(start))
	}
	if c.membersOnly() {
		// A members change leaves what a status pass reads as it was
		// (EndpointMembers keeps the translation's Ours, Accepted and
		// Gateway status; no address moves), so a pass now would publish
		// what the last one did. Run's paced pass still runs it,
		// storePassEvery later and with the agents' reports of the
		// change: run here, its few milliseconds of CPU at 1,000
		// Ingresses met the agent applying the change and delayed the new
		// members.
		p.statusOwed = true
		return nil
	}
	return p.statusPass(ctx, snap, "rebuild")
}

// reconcile stores what c translated: for a members change, the load
// balancers it patched alone when the reconciler can know that gives
// what Apply would (ApplyChanged, which writes them as member changes),
// else everything (Apply).
func (p *Pipeline) reconcile(ctx context.Context, c change, nodes []source.Node) (controller.Outcome, error) {
	if c.membersOnly() {
		applied, done, err := p.reconciler.ApplyChanged(ctx, c.res, nodes, c.patched)
		if done || err != nil {
			return applied, err
		}
	}
	return p.reconciler.Apply(ctx, c.res, nodes)
}

// statusPass decides what every object of our class publishes from the
// index and publishes it. It reads nothing from the store.
func (p *Pipeline) statusPass(ctx context.Context, snap *source.Snapshot, trigger string) error {
	if p.result == nil {
		return nil
	}
	p.statusOwed = false
	p.Metrics.StatusPasses.WithLabelValues(trigger).Inc()
	p.Metrics.LoadBalancers.Set(float64(p.index.Len()))
	next := status.Decide(p.result, p.index.ByUUID(), p.Status.Current(snap), p.Addresses.FromService(snap.Services))
	if err := p.Status.Publish(ctx, snap, p.result.Ours, next); err != nil {
		return err
	}
	gwStatus := status.Gateways(p.result.Gateway, next)
	p.updateGatewayView(snap, p.result, gwStatus, next)
	if gw, ok := p.Status.(GatewayStatusSink); ok && gwStatus != nil {
		return gw.PublishGateways(ctx, snap, gwStatus)
	}
	return nil
}

func countProblems(m *metrics.Metrics, problems []model.Problem) {
	counts := map[model.Severity]int{model.SeverityError: 0, model.SeverityWarning: 0}
	for _, pr := range problems {
		counts[pr.Severity]++
	}
	for sev, n := range counts {
		m.IngressProblems.WithLabelValues(string(sev)).Set(float64(n))
	}
}

// logFirstTranslation says what the first snapshot gave, once: how many
// Ingresses are ours and served, and, when there are Ingresses but none
// is ours, why (the most common first-run surprise: no IngressClass of
// pier's controller, or Ingresses that name none).
func (p *Pipeline) logFirstTranslation(snap *source.Snapshot, res *translate.Result, problems int, took time.Duration) {
	ours, accepted := 0, 0
	for ref := range res.Ours {
		if ref.Kind == model.KindIngress {
			ours++
		}
	}
	for ref := range res.Accepted {
		if ref.Kind == model.KindIngress {
			accepted++
		}
	}
	p.Logger.Info("first translation", "ingresses", len(snap.Ingresses), "ingresses_ours", ours, "ingresses_accepted", accepted,
		"load_balancers", len(res.LoadBalancers), "problems", problems, "took", took.Round(time.Millisecond))
	if len(snap.Ingresses) == 0 || ours > 0 {
		return
	}
	classes, classless := translate.ClassUse(snap, p.Translate)
	p.Logger.Warn("none of the Ingresses is of a class pier serves: an Ingress is pier's when its spec.ingressClassName names an IngressClass whose spec.controller is pier's, or when it names no class and such an IngressClass is the default (annotation ingressclass.kubernetes.io/is-default-class: \"true\") or --classless-ingresses is set",
		"ingresses", len(snap.Ingresses), "without_class", classless, "ingress_classes_of_pier", classes, "controller", p.Translate.ControllerName)
}
