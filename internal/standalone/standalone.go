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
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/status"
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
	alloc, err := ipam.FromCIDRs(cfg.InternalPool, cfg.PublicPool)
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
	v := newView(logger)
	p := &pipeline.Pipeline{
		Store: st, Translate: cfg.Translate, Addresses: cfg.Status, Status: v, Problems: v,
		Metrics: m, Logger: logger, Observe: v.observe,
		Reconciler: &controller.Reconciler{Store: st, IPAM: alloc, Logger: logger,
			Nodes: func() []string { return []string{cfg.Node} }},
	}
	offer := func(snap *source.Snapshot, problems []files.Problem) {
		for _, sp := range problems {
			logger.Warn("manifest document skipped", "problem", sp.String())
		}
		m.SourceProblems.Set(float64(len(problems)))
		p.Offer(snap)
	}
	offer(snap, srcProblems)

	ag := agent.New(agent.Config{
		Node: cfg.Node, StateDir: stateDir, Store: st, Secrets: v,
		HAProxyBinary: cfg.HAProxyBinary, Render: cfg.Render,
		StopOnExit: true, Metrics: m, Logger: logger.With("component", "agent"),
	})
	srv := &api.Server{Store: st, Ingresses: v, Registry: m.Registry, Logger: logger,
		Healthy: p.Ready, UI: v.web(st)} // UI: web view, issue 12 (web.go)

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
	start("pipeline", p.Run)
	start("agent", func(ctx context.Context) error {
		// The store may hold specs from before a restart: let the first
		// rebuild bring it up to date, or HAProxy would be reloaded twice
		// (once to the stale spec, once to the current one).
		if err := waitReady(ctx, p); err != nil {
			return err
		}
		return ag.Run(ctx)
	})
	start("api", func(ctx context.Context) error { return srv.ListenAndServe(ctx, cfg.APIAddr) })
	start("watch", func(ctx context.Context) error {
		return files.Watch(ctx, cfg.Paths, logger.With("component", "files"), offer)
	})
	logger.Info("pier run started", "manifests", cfg.Paths, "state_dir", stateDir, "api", "http://"+cfg.APIAddr,
		"internal_pool", cfg.InternalPool, "public_pool", cfg.PublicPool)
	wg.Wait()
	close(errs)
	return errors.Join(collect(errs)...)
}

func waitReady(ctx context.Context, p *pipeline.Pipeline) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.Ready() != nil {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
	return nil
}

func collect(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
