// Package standalone is `pier run`: the whole pipeline
// (docs/architecture.md) in one process, fed by manifest files instead of
// an API server — files → translate → IPAM → embedded store → scheduler →
// agent → HAProxy, with the Ingress status kept in memory and served by the
// read-only API.
package standalone

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/routerid"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/internal/statedir"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/internal/web"
)

// Config is everything `pier run` takes from its flags.
type Config struct {
	Paths        []string
	StateDir     string
	InternalPool string
	PublicPool   string // empty: no floating IPs unless pinned inside the internal pool
	// AddressQuarantine keeps a freed VIP or FIP for its last holder
	// (--address-quarantine).
	AddressQuarantine time.Duration
	// Quota caps each namespace's load balancers and floating IPs.
	Quota     controller.Quota
	RouterIDs string // --vrrp-router-ids, "FIRST-LAST"
	APIAddr   string
	// APIAllowedHosts are the host names the API and web view answer
	// besides their address (api.Server.AllowedHosts).
	APIAllowedHosts []string
	Node            string
	HAProxyBinary   string
	// HAProxyProcesses packs each node's load balancers into at most this
	// many HAProxy processes; 0 runs one per load balancer.
	HAProxyProcesses int
	// HAProxyLanding sizes each node's landing process
	// (haproxydriver.Config.Landing).
	HAProxyLanding render.LandingOptions
	// ApplyConcurrency bounds the load balancers each agent applies at
	// once (agent.Config.ApplyConcurrency).
	ApplyConcurrency int
	// Nodes ≥ 2 runs that many nodes, each a network namespace with its
	// own HAProxy and keepalived (package lab): the active/standby pair
	// without a cluster. Needs root.
	Nodes            int
	LabPrefix        string // namespace names: <prefix>n0, <prefix>c, …
	KeepalivedBinary string
	// VRRPAdvert is the nodes' VRRP advert interval; 0 is
	// vrrp.DefaultAdvert.
	VRRPAdvert time.Duration
	// ECMP, with Nodes ≥ 2, moves the addresses with BGP to a router
	// host running bird and places native load balancers on every node
	// (ECMP) instead of a pair.
	ECMP bool
	// BFD, with ECMP, runs BFD between the router and every node's
	// speaker (bird's bgp protocols get `bfd on`): a node cut off is out
	// of the router's routes within BFD's detection time.
	BFD       bgp.BFD
	Translate translate.Options
	Render    render.Options
	Status    status.Addresses
	// AccessLog receives every node's access-log lines
	// (haproxydriver.Config.AccessLog).
	AccessLog io.Writer
}

// Run runs pier until ctx ends, then stops HAProxy gracefully.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) error {
	stateDir, err := statedir.Prepare(cfg.StateDir)
	if err != nil {
		return err
	}
	alloc, err := ipam.FromCIDRs(cfg.InternalPool, cfg.PublicPool)
	if err != nil {
		return err
	}
	alloc.SetQuarantine(cfg.AddressQuarantine)
	ids, err := routerid.ParseRange("--vrrp-router-ids", cfg.RouterIDs)
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
		Store: st, IPAM: alloc, RouterIDs: routerid.New(ids), Quota: cfg.Quota, NativeECMP: cfg.ECMP && cfg.Nodes >= 2, Translate: cfg.Translate, Addresses: cfg.Status, Status: v,
		Metrics: m, Logger: logger, Observe: v.observe,
	}
	// pier run's nodes come with every snapshot, as the Node informer's
	// do in Kubernetes mode.
	nodes, removeLab, err := agentMaker{cfg: cfg, store: st, secrets: v, configMaps: v, metrics: m}.nodes(stateDir, logger)
	if err != nil {
		return err
	}
	defer removeLab()
	if err := reserveLeftovers(ctx, st, alloc, nodes.agentDirs(stateDir, cfg.Nodes >= 2), cfg.AddressQuarantine, logger); err != nil {
		return err
	}
	offer := func(snap *source.Snapshot, problems []files.Problem) {
		for _, sp := range problems {
			logger.Warn("manifest document skipped", "problem", sp.String())
		}
		m.SourceProblems.Set(float64(len(problems)))
		withNodes := *snap
		withNodes.Nodes = nodes.forSnapshot(snap.Nodes)
		p.Offer(&withNodes)
	}
	offer(snap, srcProblems)
	// The API and the web view read a mirror: a read of one Ingress
	// would otherwise decode every stored load balancer.
	mirror := store.NewMirror(st, logger.With("component", "mirror"))
	srv := &api.Server{Store: mirror, Ingresses: p, Gateways: p, Registry: m.Registry, Logger: logger, Healthy: p.Ready,
		AllowedHosts: cfg.APIAllowedHosts,
		UI:           &web.Handler{Store: mirror, Ingresses: p, Gateways: p, Config: web.ConfigOnDisk(stateDir), Logger: logger.With("component", "web")}}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(named("pipeline", func() error { return p.Run(ctx) }))
	g.Go(func() error { mirror.Run(ctx); return nil })
	for _, n := range nodes.nodes {
		g.Go(named("agent "+n.source.Name, func() error {
			// The store may hold specs from before a restart: let the
			// first rebuild bring it up to date, or HAProxy would be
			// reloaded twice (once to the stale spec, once to the
			// current one).
			if err := waitReady(ctx, p); err != nil {
				return err
			}
			return n.agent.Run(ctx)
		}))
	}
	g.Go(named("api", func() error { return srv.ListenAndServe(ctx, cfg.APIAddr) }))
	g.Go(named("watch", func() error {
		return files.Watch(ctx, cfg.Paths, logger.With("component", "files"), offer)
	}))
	logger.Info("pier run started", "manifests", cfg.Paths, "state_dir", stateDir, "api", "http://"+cfg.APIAddr,
		"internal_pool", cfg.InternalPool, "public_pool", cfg.PublicPool)
	return g.Wait()
}

// named runs f as one of Run's goroutines: its error names it, and a
// cancellation (the others ending) is not an error.
func named(name string, f func() error) func() error {
	return func() error {
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
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
