package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/routerid"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/store"
	kubestore "pier.dev/pier/internal/store/kube"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/internal/web"
)

// ControllerConfig is what `pier controller` takes from its flags.
type ControllerConfig struct {
	Kubeconfig   string // empty: in-cluster
	APIRate      APIRate
	InternalPool string
	PublicPool   string
	// AddressQuarantine keeps a freed VIP or FIP for its last holder
	// (--address-quarantine).
	AddressQuarantine time.Duration
	// Quota caps each namespace's load balancers and floating IPs.
	Quota controller.Quota
	// NativeECMP places native load balancers on every ready node
	// (--native-ecmp).
	NativeECMP      bool
	RouterIDs       string // --vrrp-router-ids, "FIRST-LAST"
	APIAddr         string
	APIAllowedHosts []string // host names the API answers besides its address (api.Server.AllowedHosts)
	WatchNamespace  string
	NodeSelector    string
	LeaseNamespace  string // the leader-election Lease and the agents' heartbeat Leases
	LeaseName       string
	Identity        string // empty: hostname plus a random suffix
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	Translate       translate.Options
	Status          status.Addresses
}

// APIRate is how fast a command's client may talk to the API server.
// client-go's own default (5 requests a second, bursts of 10) is sized
// for a kubectl; at that rate 3,000 load balancers take ten minutes to
// store, and every status write queues behind them.
type APIRate struct {
	QPS   float32 // sustained requests a second
	Burst int     // requests allowed at once above QPS
}

// Default rates: the controller writes every load balancer and status of
// the installation; an agent writes its own node's Lease and one report
// per load balancer it holds. At rest that is its Lease alone; after a
// cold start or a node's return it is a report for each of hundreds of
// load balancers, and at 10 a second 600 of them took a minute. The
// reports of the whole cluster are two per load balancer whatever the
// number of nodes, so a faster agent shortens that burst without adding
// to it.
var (
	DefaultControllerAPIRate = APIRate{QPS: 50, Burst: 100}
	DefaultAgentAPIRate      = APIRate{QPS: 25, Burst: 50}
)

// validate refuses a negative rate; the zero APIRate means the default.
func (r APIRate) validate(flag string) error {
	if r.QPS < 0 || r.Burst < 0 || (r.QPS > 0) != (r.Burst > 0) {
		return fmt.Errorf("%s-qps and %s-burst must both be above 0 (got %g and %d)", flag, flag, r.QPS, r.Burst)
	}
	return nil
}

// apply sets the rate, or def for the zero APIRate, on a copy of cfg.
func (r APIRate) apply(cfg *rest.Config, def APIRate) *rest.Config {
	if r == (APIRate{}) {
		r = def
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = r.QPS, r.Burst
	return cfg
}

// RestConfig loads a kubeconfig file, or the in-cluster config when path
// is empty.
func RestConfig(path string) (*rest.Config, error) {
	if path == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig and not in a cluster: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// connect opens what both commands need: a client and the LoadBalancer
// store on the custom resource. wrap, if set, wraps their transport (the
// controller's write fence); node is an agent's (kubestore.Options.Node).
func connect(restCfg *rest.Config, wrap func(http.RoundTripper) http.RoundTripper, node string, logger *slog.Logger) (*rest.Config, kubernetes.Interface, *kubestore.Store, error) {
	if wrap != nil {
		restCfg = rest.CopyConfig(restCfg)
		restCfg.Wrap(wrap)
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	st, err := kubestore.New(restCfg, kubestore.Options{Node: node, Logger: logger.With("component", "store")})
	if err != nil {
		return nil, nil, nil, err
	}
	return restCfg, client, st, nil
}

// RunController runs `pier controller` until ctx ends or leadership is
// lost (the process then exits, so a restart starts clean). Every replica
// serves the API; only the leader allocates addresses, writes load
// balancers, Ingress status and Events.
func RunController(ctx context.Context, cfg ControllerConfig, logger *slog.Logger) error {
	selector, alloc, ids, err := controllerSettings(cfg)
	if err != nil {
		return err
	}
	bridgeKlog(logger)
	baseCfg, err := RestConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	baseCfg = cfg.APIRate.apply(baseCfg, DefaultControllerAPIRate)
	// Every write but the lease's own passes the fence; the lease's
	// renewals are what open it.
	fence := newWriteFence(orDefault(cfg.LeaseDuration, defaultLeaseDuration), logger.With("component", "leader"))
	restCfg, client, st, err := connect(baseCfg, fence.transport, "", logger)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkLeaseNamespace(ctx, client, cfg.LeaseNamespace); err != nil {
		return err
	}
	gwClient, err := gwclient.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("gateway api client: %w", err)
	}
	dynClient, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	statusWriter := newStatusWriter(client, gwClient, cfg.Translate.GatewayControllerName, logger)
	statusWriter.dyn = dynClient

	m := metrics.New()
	events := newEventSink(client)
	defer events.shutdown()
	p := &pipeline.Pipeline{
		Store: st, IPAM: alloc, RouterIDs: routerid.New(ids), Quota: cfg.Quota, NativeECMP: cfg.NativeECMP, Translate: cfg.Translate, Addresses: cfg.Status,
		Status: statusWriter, Problems: events, Metrics: m, Logger: logger,
	}
	// The web view's Ingress pages come from the pipeline, which only the
	// leader runs; load balancer pages are complete on every replica.
	election := &electionState{}
	// The API and the web view read a mirror, kept by a watch on every
	// replica: a read of one Ingress would otherwise list every load
	// balancer from the API server.
	mirror := store.NewMirror(st, logger.With("component", "mirror"))
	srv := &api.Server{Store: mirror, Ingresses: p, Gateways: p, Registry: m.Registry, Logger: logger,
		Ready:        func() error { return election.ready(p) },
		AllowedHosts: cfg.APIAllowedHosts,
		UI: &web.Handler{Store: mirror, Ingresses: p, Gateways: p, Logger: logger.With("component", "web"),
			Config: web.ConfigFromSpec(DefaultAgentStateDir, render.Options{})}}
	leaseClient, err := kubernetes.NewForConfig(baseCfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	lock, err := leaseLock(leaseClient, cfg)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	g.Go(named("api server", func() error { return srv.ListenAndServe(ctx, cfg.APIAddr) }))
	g.Go(func() error { mirror.Run(ctx); return nil })
	g.Go(func() error {
		err := elect(ctx, lock, fence, election, cfg, logger, func(lctx context.Context) error {
			return lead(lctx, client, gwClient, dynClient, cfg, selector, p, st, logger)
		})
		if err == nil {
			err = context.Canceled // done: end the API server too
		}
		return err
	})
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// controllerSettings parses and checks what RunController reads of cfg
// before it connects: the node selector, the address pools and the VRRP
// router ids; a bad one fails before any API call.
func controllerSettings(cfg ControllerConfig) (labels.Selector, *ipam.Allocator, routerid.Range, error) {
	selector, err := labels.Parse(cfg.NodeSelector)
	if err != nil {
		return nil, nil, routerid.Range{}, fmt.Errorf("--node-selector: %w", err)
	}
	alloc, err := ipam.FromCIDRs(cfg.InternalPool, cfg.PublicPool)
	if err != nil {
		return nil, nil, routerid.Range{}, err
	}
	alloc.SetQuarantine(cfg.AddressQuarantine)
	ids, err := routerid.ParseRange("--vrrp-router-ids", cfg.RouterIDs)
	if err != nil {
		return nil, nil, routerid.Range{}, err
	}
	if err := cfg.APIRate.validate("--kube-api"); err != nil {
		return nil, nil, routerid.Range{}, err
	}
	return selector, alloc, ids, nil
}

// elect runs leaderelection until ctx ends or leadership is lost, calling
// work while this replica leads. A lost lease is an error: the process
// exits so a restart starts clean.
func elect(ctx context.Context, lock *resourcelock.LeaseLock, fence *writeFence, state *electionState, cfg ControllerConfig, logger *slog.Logger,
	work func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go fence.watch(ctx)
	var workErr error
	var lost atomic.Bool
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            fencedLock{Interface: lock, fence: fence},
		LeaseDuration:   orDefault(cfg.LeaseDuration, defaultLeaseDuration),
		RenewDeadline:   orDefault(cfg.RenewDeadline, 10*time.Second),
		RetryPeriod:     orDefault(cfg.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				logger.Info("leading: this replica now allocates and writes", "identity", lock.Identity())
				state.leading.Store(true)
				workErr = work(lctx)
				cancel()
			},
			OnStoppedLeading: func() {
				state.leading.Store(false)
				fence.lose()
				if ctx.Err() == nil {
					lost.Store(true)
				}
				cancel()
			},
			OnNewLeader: func(id string) {
				state.leaderSeen.Store(true)
				logger.Info("leader", "identity", id)
			},
		},
	})
	if lost.Load() {
		return errors.New("lost leadership; exiting so a restart starts clean (status and load balancers are left as they are)")
	}
	return workErr
}

// electionState is what the readiness probe knows of the election.
type electionState struct {
	leading    atomic.Bool
	leaderSeen atomic.Bool // a leader's Lease was read: the API server answers
}

// ready is the controller's readiness: a standby replica is ready once it
// has read the leader's Lease (it reaches the API server and would take
// over when the leader goes); the leader once its first rebuild is done,
// so a rollout does not end the old leader before the new replica could
// follow it.
func (e *electionState) ready(p *pipeline.Pipeline) error {
	switch {
	case e.leading.Load():
		if err := p.Ready(); err != nil {
			return fmt.Errorf("leading: %w", err)
		}
		return nil
	case e.leaderSeen.Load():
		return nil
	}
	return errors.New("no leader's Lease read yet")
}

// named runs f as one of the process's goroutines: its error names it,
// and a cancellation (the others ending) is not an error.
func named(name string, f func() error) func() error {
	return func() error {
		if err := f(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
}

// lead runs the informers and the pipeline while this replica leads.
// Whichever of the two ends first ends the other: a pipeline that failed
// must not leave the informers running with nobody applying their
// snapshots (the replica would lead, silently doing nothing).
func lead(ctx context.Context, client kubernetes.Interface, gwClient gwclient.Interface, dynClient dynamic.Interface, cfg ControllerConfig,
	selector labels.Selector, p *pipeline.Pipeline, st *kubestore.Store, logger *slog.Logger) error {
	src := sourcekube.New(client, sourcekube.Options{Namespace: cfg.WatchNamespace, NodeSelector: selector,
		LeaseNamespace: cfg.LeaseNamespace, Gateway: gwClient, Dynamic: dynClient},
		logger.With("component", "source"))
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { labelPlacements(ctx, st, logger); return nil })
	g.Go(func() error { return orCanceled(p.Run(ctx)) })
	g.Go(func() error { return orCanceled(src.Run(ctx, p.Offer)) })
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// labelPlacements labels the load balancers an older controller wrote,
// once per leadership, retrying every relabelRetry until it is done:
// until every one is labelled, agents watch them all (kubestore.NodeLabel).
func labelPlacements(ctx context.Context, st *kubestore.Store, logger *slog.Logger) {
	total := 0
	for {
		n, err := st.LabelPlacements(ctx)
		total += n
		if err == nil {
			if total > 0 {
				logger.Info("labelled the placement of load balancers an older controller wrote", "labelled", total)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		logger.Warn("cannot label every load balancer's placement yet; agents watch every load balancer until it is done",
			"labelled", total, "retryIn", relabelRetry, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(relabelRetry):
		}
	}
}

// relabelRetry spaces the attempts of labelPlacements.
const relabelRetry = 30 * time.Second

// orCanceled turns a clean return into context.Canceled, so the first of
// an errgroup's goroutines to end, for any reason, ends the others.
func orCanceled(err error) error {
	if err == nil {
		return context.Canceled
	}
	return err
}

func leaseLock(client kubernetes.Interface, cfg ControllerConfig) (*resourcelock.LeaseLock, error) {
	id := cfg.Identity
	if id == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("hostname for the leader identity: %w", err)
		}
		// A unique suffix: two replicas on one host must not share an
		// identity, or both would think they hold the Lease.
		id = host + "_" + rand.String(8)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(cfg.LeaseNamespace, cfg.LeaseName),
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}, nil
}

// defaultLeaseDuration is client-go's and kube-controller-manager's.
const defaultLeaseDuration = 15 * time.Second

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
