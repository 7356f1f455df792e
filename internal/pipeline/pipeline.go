// Package pipeline is the controller's loop, shared by `pier run` and
// `pier controller`: each snapshot is translated, reconciled into the store
// (IPAM, scheduler), its problems reported, and the Ingress status decided
// from what agents report. One goroutine does all of it (Contour's rule), so
// nothing else writes load-balancer specs. Where status and problems go is
// pluggable: memory for pier run, the API server for the controller.
package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/translate"
)

// Published maps "namespace/name" to the addresses an Ingress publishes.
type Published = map[string][]networkingv1.IngressLoadBalancerIngress

// StatusSink is where Ingress status goes.
type StatusSink interface {
	// Current returns what the Ingresses of snap publish now.
	Current(snap *source.Snapshot) Published
	// Publish makes every Ingress in ours publish next[key] (nothing when
	// absent). Implementations skip Ingresses whose status already equals.
	Publish(ctx context.Context, snap *source.Snapshot, ours map[string]bool, next Published) error
}

// ProblemSink receives the problems of every rebuild; it decides what is
// new (Events and logs must not repeat every rebuild).
type ProblemSink interface {
	Report(ctx context.Context, snap *source.Snapshot, problems []model.Problem)
}

// Pipeline turns snapshots into stored LoadBalancers and Ingress status.
type Pipeline struct {
	Store      store.Store
	Reconciler *controller.Reconciler
	Translate  translate.Options
	Addresses  status.Addresses
	Status     StatusSink
	Problems   ProblemSink
	Metrics    *metrics.Metrics
	Logger     *slog.Logger
	// Observe, if set, sees each snapshot before anything is stored, so
	// readers of the snapshot (the agent's Secrets in pier run) are never
	// older than the load balancers that refer to it.
	Observe func(*source.Snapshot)

	snaps chan *source.Snapshot
	once  sync.Once

	mu     sync.Mutex
	ready  bool
	snap   *source.Snapshot
	result *translate.Result
}

func (p *Pipeline) init() { p.once.Do(func() { p.snaps = make(chan *source.Snapshot, 1) }) }

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

// Ready reports an error until the first snapshot has been processed.
func (p *Pipeline) Ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return fmt.Errorf("first rebuild not done")
	}
	return nil
}

// Run processes snapshots and agent reports until ctx ends.
func (p *Pipeline) Run(ctx context.Context) error {
	p.init()
	events, err := p.Store.Watch(ctx)
	if err != nil {
		return fmt.Errorf("watch store: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case snap := <-p.snaps:
			if err := p.rebuild(ctx, snap); err != nil {
				return err
			}
		case _, ok := <-events:
			if !ok {
				return nil
			}
			drain(events)
			// Agents report through the store; their reports decide status.
			if err := p.updateStatus(ctx); err != nil {
				return err
			}
		}
	}
}

// drain drops store events already queued: one status pass covers them.
func drain(events <-chan store.Event) {
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

func (p *Pipeline) rebuild(ctx context.Context, snap *source.Snapshot) error {
	start := time.Now()
	if p.Observe != nil {
		p.Observe(snap)
	}
	opts := p.Translate
	opts.Now = start
	res := translate.Ingresses(snap, opts)
	ipamProblems, err := p.Reconciler.Apply(ctx, res)
	if err != nil {
		return err
	}
	problems := append(res.Problems, ipamProblems...)
	p.Problems.Report(ctx, snap, problems)
	p.mu.Lock()
	p.snap, p.result, p.ready = snap, res, true
	p.mu.Unlock()
	p.Metrics.Rebuilds.Inc()
	p.Metrics.RebuildSeconds.Observe(time.Since(start).Seconds())
	countProblems(p.Metrics, problems)
	p.Logger.Debug("rebuilt", "ingresses", len(res.Ours), "accepted", len(res.Accepted),
		"load_balancers", len(res.LoadBalancers), "problems", len(problems), "took", time.Since(start))
	return p.updateStatus(ctx)
}

func (p *Pipeline) updateStatus(ctx context.Context) error {
	p.mu.Lock()
	snap, res := p.snap, p.result
	p.mu.Unlock()
	if res == nil {
		return nil
	}
	lbs, err := p.Store.List(ctx)
	if err != nil {
		return fmt.Errorf("list load balancers: %w", err)
	}
	p.Metrics.LoadBalancers.Set(float64(len(lbs)))
	byUUID := map[string]*model.LoadBalancer{}
	for _, lb := range lbs {
		byUUID[lb.UUID] = lb
	}
	next := status.Decide(res, byUUID, p.Status.Current(snap), p.Addresses.FromService(snap.Services))
	return p.Status.Publish(ctx, snap, res.Ours, next)
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

// ProblemLog logs each problem once, when it first appears or changes.
type ProblemLog struct {
	Logger   *slog.Logger
	reported map[string]string
}

// New returns the problems not reported before, and logs them.
func (l *ProblemLog) New(problems []model.Problem) []model.Problem {
	seen := map[string]string{}
	var fresh []model.Problem
	for _, pr := range problems {
		key := pr.Kind + "|" + pr.Namespace + "/" + pr.Name + "|" + pr.Reason + "|" + pr.Field
		seen[key] = pr.Message
		if l.reported[key] == pr.Message {
			continue
		}
		fresh = append(fresh, pr)
		level, msg := slog.LevelWarn, "ingress warning"
		if pr.Severity == model.SeverityError {
			level, msg = slog.LevelError, "ingress refused"
		}
		l.Logger.Log(context.Background(), level, msg, "ingress", pr.Namespace+"/"+pr.Name,
			"reason", pr.Reason, "field", pr.Field, "message", pr.Message)
	}
	l.reported = seen
	return fresh
}
