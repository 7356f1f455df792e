// Package standalone is `pier run`: the whole pipeline of DESIGN.md in one
// process, fed by manifest files instead of an API server — files →
// translate → IPAM → embedded store → scheduler → agent → HAProxy, with the
// Ingress status kept in memory and served by the read-only API.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"pier.dev/pier/internal/agent"
	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// Config is everything `pier run` takes from its flags.
type Config struct {
	Paths         []string
	StateDir      string
	InternalPool  string
	PublicPool    string // empty: no floating IPs unless pinned inside the internal pool
	APIAddr       string
	Node          string
	HAProxyBinary string
	Translate     translate.Options
	Render        render.Options
	Status        status.Addresses
}

// Run runs pier until ctx ends, then stops HAProxy gracefully.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("state dir %s: %w", cfg.StateDir, err)
	}
	if err := render.CheckStateDir(stateDir); err != nil {
		return fmt.Errorf("--state-dir: %w", err)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return fmt.Errorf("create state dir: %w", err)
	}
	alloc, err := newAllocator(cfg)
	if err != nil {
		return err
	}
	snap, srcProblems, err := files.Load(cfg.Paths)
	if err != nil {
		return fmt.Errorf("read manifests: %w", err)
	}
	st, err := bolt.Open(filepath.Join(stateDir, "pier.db"))
	if err != nil {
		return err
	}
	defer st.Close()

	m := metrics.New()
	v := newView()
	p := &pipeline{
		cfg: cfg, store: st, view: v, metrics: m, logger: logger,
		reconciler: &controller.Reconciler{Store: st, IPAM: alloc, Logger: logger,
			Nodes: func() []string { return []string{cfg.Node} }},
		snaps: make(chan sourceUpdate, 1),
	}
	p.offer(sourceUpdate{snap, srcProblems})

	ag := agent.New(agent.Config{
		Node: cfg.Node, StateDir: stateDir, Store: st, Secrets: v,
		HAProxyBinary: cfg.HAProxyBinary, Render: cfg.Render,
		StopOnExit: true, Metrics: m, Logger: logger.With("component", "agent"),
	})
	srv := &api.Server{Store: st, Ingresses: v, Registry: m.Registry, Logger: logger,
		Healthy: p.healthy}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	start := func(name string, f func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(ctx); err != nil && !errors.Is(err, context.Canceled) {
				errs <- fmt.Errorf("%s: %w", name, err)
				cancel()
			}
		}()
	}
	start("pipeline", p.run)
	start("agent", ag.Run)
	start("api", func(ctx context.Context) error { return srv.ListenAndServe(ctx, cfg.APIAddr) })
	start("watch", func(ctx context.Context) error {
		return files.Watch(ctx, cfg.Paths, logger.With("component", "files"), func(s *source.Snapshot, ps []files.Problem) {
			p.offer(sourceUpdate{s, ps})
		})
	})
	logger.Info("pier run started", "manifests", cfg.Paths, "state_dir", stateDir, "api", "http://"+cfg.APIAddr,
		"internal_pool", cfg.InternalPool, "public_pool", cfg.PublicPool)
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func newAllocator(cfg Config) (*ipam.Allocator, error) {
	internal, err := ipam.ParsePool("--internal-pool", cfg.InternalPool)
	if err != nil {
		return nil, err
	}
	var public *ipam.Pool
	if cfg.PublicPool != "" {
		pp, err := ipam.ParsePool("--public-pool", cfg.PublicPool)
		if err != nil {
			return nil, err
		}
		if pp.Overlaps(internal) {
			return nil, fmt.Errorf("--public-pool %s overlaps --internal-pool %s", pp, internal)
		}
		public = &pp
	}
	return ipam.New(internal, public), nil
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// sourceUpdate is one snapshot from the files source.
type sourceUpdate struct {
	snap     *source.Snapshot
	problems []files.Problem
}

// pipeline serialises rebuilds and status updates in one goroutine
// (Contour's rule): nothing else writes the store's specs.
type pipeline struct {
	cfg        Config
	store      store.Store
	view       *view
	metrics    *metrics.Metrics
	logger     *slog.Logger
	reconciler *controller.Reconciler
	snaps      chan sourceUpdate

	mu       sync.Mutex
	ready    bool
	result   *translate.Result
	reported map[string]string // problem key → message, to log each problem once
}

// offer replaces any snapshot not yet processed: only the latest matters.
func (p *pipeline) offer(u sourceUpdate) {
	for {
		select {
		case p.snaps <- u:
			return
		default:
		}
		select {
		case <-p.snaps:
		default:
		}
	}
}

func (p *pipeline) healthy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.ready {
		return errors.New("first rebuild not done")
	}
	return nil
}

func (p *pipeline) run(ctx context.Context) error {
	events, err := p.store.Watch(ctx)
	if err != nil {
		return fmt.Errorf("watch store: %w", err)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u := <-p.snaps:
			if err := p.rebuild(ctx, u); err != nil {
				return err
			}
		case _, ok := <-events:
			if !ok {
				return nil
			}
			// Agents report through the store; their reports decide status.
			if err := p.updateStatus(ctx); err != nil {
				return err
			}
		}
	}
}

func (p *pipeline) rebuild(ctx context.Context, u sourceUpdate) error {
	start := time.Now()
	for _, sp := range u.problems {
		p.logger.Warn("manifest document skipped", "file", sp.File, "doc", sp.Doc, "problem", sp.Message)
	}
	p.metrics.SourceProblems.Set(float64(len(u.problems)))
	opts := p.cfg.Translate
	opts.Now = start
	res := translate.Ingresses(u.snap, opts)
	ipamProblems, err := p.reconciler.Apply(ctx, res)
	if err != nil {
		return err
	}
	problems := append(res.Problems, ipamProblems...)
	p.view.setSnapshot(u.snap, problems)
	p.logProblems(problems)
	p.mu.Lock()
	p.result, p.ready = res, true
	p.mu.Unlock()
	p.metrics.Rebuilds.Inc()
	p.metrics.RebuildSeconds.Observe(time.Since(start).Seconds())
	countProblems(p.metrics, problems)
	p.logger.Debug("rebuilt", "ingresses", len(res.Ours), "accepted", len(res.Accepted),
		"load_balancers", len(res.LoadBalancers), "problems", len(problems), "took", time.Since(start))
	return p.updateStatus(ctx)
}

func (p *pipeline) updateStatus(ctx context.Context) error {
	p.mu.Lock()
	res := p.result
	p.mu.Unlock()
	if res == nil {
		return nil
	}
	lbs, err := p.store.List(ctx)
	if err != nil {
		return fmt.Errorf("list load balancers: %w", err)
	}
	p.metrics.LoadBalancers.Set(float64(len(lbs)))
	byUUID := map[string]*model.LoadBalancer{}
	for _, lb := range lbs {
		byUUID[lb.UUID] = lb
	}
	prev := p.view.publishedCopy()
	next := status.Decide(res, byUUID, prev, p.cfg.Status)
	for _, key := range status.Keys(next) {
		if !status.Equal(prev[key], next[key]) {
			p.logger.Info("ingress status updated", "ingress", key, "addresses", status.String(next[key]))
		}
	}
	p.view.setPublished(next)
	return nil
}

// logProblems logs each problem once, when it first appears: a rebuild
// every second must not repeat the same warning forever.
func (p *pipeline) logProblems(problems []model.Problem) {
	seen := map[string]string{}
	for _, pr := range problems {
		key := pr.Namespace + "/" + pr.Name + "|" + pr.Reason + "|" + pr.Field
		seen[key] = pr.Message
		if p.reported[key] == pr.Message {
			continue
		}
		level := slog.LevelWarn
		msg := "ingress warning"
		if pr.Severity == model.SeverityError {
			level, msg = slog.LevelError, "ingress refused"
		}
		p.logger.Log(context.Background(), level, msg, "ingress", pr.Namespace+"/"+pr.Name,
			"reason", pr.Reason, "field", pr.Field, "message", pr.Message)
	}
	p.reported = seen
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
