package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/status"
	kubestore "pier.dev/pier/internal/store/kube"
	"pier.dev/pier/internal/translate"
)

// ControllerConfig is what `pier controller` takes from its flags.
type ControllerConfig struct {
	Kubeconfig     string // empty: in-cluster
	InternalPool   string
	PublicPool     string
	APIAddr        string
	WatchNamespace string
	NodeSelector   string
	LeaseNamespace string
	LeaseName      string
	Identity       string // empty: hostname plus a random suffix
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	Translate      translate.Options
	Status         status.Addresses
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
// store on the custom resource.
func connect(kubeconfig string, logger *slog.Logger) (kubernetes.Interface, *kubestore.Store, error) {
	bridgeKlog(logger)
	restCfg, err := RestConfig(kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	st, err := kubestore.New(restCfg, kubestore.Options{Logger: logger.With("component", "store")})
	if err != nil {
		return nil, nil, err
	}
	return client, st, nil
}

// RunController runs `pier controller` until ctx ends or leadership is
// lost (the process then exits, so a restart starts clean). Every replica
// serves the API; only the leader allocates addresses, writes load
// balancers, Ingress status and Events.
func RunController(ctx context.Context, cfg ControllerConfig, logger *slog.Logger) error {
	selector, err := labels.Parse(cfg.NodeSelector)
	if err != nil {
		return fmt.Errorf("--node-selector: %w", err)
	}
	alloc, err := ipam.FromCIDRs(cfg.InternalPool, cfg.PublicPool)
	if err != nil {
		return err
	}
	client, st, err := connect(cfg.Kubeconfig, logger)
	if err != nil {
		return err
	}
	defer st.Close()

	m := metrics.New()
	events := newEventSink(client, logger)
	defer events.shutdown()
	var latest atomic.Pointer[source.Snapshot]
	p := &pipeline.Pipeline{
		Store: st, Translate: cfg.Translate, Addresses: cfg.Status,
		Status: newStatusWriter(client, logger), Problems: events, Metrics: m, Logger: logger,
		Reconciler: &controller.Reconciler{Store: st, IPAM: alloc, Logger: logger, Nodes: func() []string {
			if snap := latest.Load(); snap != nil {
				return sourcekube.ReadyNodes(snap.Nodes, selector)
			}
			return nil
		}},
	}
	srv := &api.Server{Store: st, Ingresses: events, Registry: m.Registry, Logger: logger,
		UI: events.web(st, logger)} // UI: web view, issue 12 (web.go)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.ListenAndServe(ctx, cfg.APIAddr); err != nil && !errors.Is(err, context.Canceled) {
			logger.Error("api server", "error", err)
			cancel()
		}
	}()
	defer wg.Wait()

	lock, err := leaseLock(client, cfg)
	if err != nil {
		return err
	}
	var leaderErr error
	var lost atomic.Bool
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   orDefault(cfg.LeaseDuration, 15*time.Second),
		RenewDeadline:   orDefault(cfg.RenewDeadline, 10*time.Second),
		RetryPeriod:     orDefault(cfg.RetryPeriod, 2*time.Second),
		ReleaseOnCancel: true,
		Name:            cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				logger.Info("leading: this replica now allocates and writes", "identity", lock.Identity())
				leaderErr = lead(lctx, client, cfg, p, &latest, logger)
				cancel()
			},
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					lost.Store(true)
				}
				cancel()
			},
			OnNewLeader: func(id string) { logger.Info("leader", "identity", id) },
		},
	})
	if lost.Load() {
		return errors.New("lost leadership; exiting so a restart starts clean (status and load balancers are left as they are)")
	}
	return leaderErr
}

// lead runs the informers and the pipeline while this replica leads.
func lead(ctx context.Context, client kubernetes.Interface, cfg ControllerConfig, p *pipeline.Pipeline,
	latest *atomic.Pointer[source.Snapshot], logger *slog.Logger) error {
	// Whichever of the two ends first ends the other: a pipeline that
	// failed must not leave the informers running with nobody applying
	// their snapshots (the replica would lead, silently doing nothing).
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	src := sourcekube.New(client, sourcekube.Options{Namespace: cfg.WatchNamespace}, logger.With("component", "source"))
	errc := make(chan error, 1)
	go func() {
		err := p.Run(ctx)
		cancel()
		errc <- err
	}()
	err := src.Run(ctx, func(snap *source.Snapshot) {
		latest.Store(snap)
		p.Offer(snap)
	})
	cancel()
	if perr := <-errc; perr != nil {
		err = perr // the pipeline's failure is the cause; the source only stopped
	}
	if errors.Is(err, context.Canceled) {
		return nil
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
		// identity (RELIABILITY, leader election rule 4).
		id = host + "_" + rand.String(8)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metaFor(cfg.LeaseNamespace, cfg.LeaseName),
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}
