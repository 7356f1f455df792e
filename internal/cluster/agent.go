package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/internal/agent"
	"pier.dev/pier/internal/agent/addrhold"
	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/agent/splitdriver"
	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/statedir"
	kubestore "pier.dev/pier/internal/store/kube"
	"pier.dev/pier/internal/vrrp"
)

// DefaultAgentStateDir is where `pier agent` keeps its HAProxy folders
// unless --state-dir says otherwise; the controller's web view renders
// configs as an agent there would.
const DefaultAgentStateDir = "/var/lib/pier"

// AgentConfig is what `pier agent` takes from its flags.
type AgentConfig struct {
	Kubeconfig    string
	APIRate       APIRate
	Node          string
	StateDir      string
	HAProxyBinary string
	// HAProxyProcesses packs the node's load balancers into at most this
	// many HAProxy processes; 0 runs one per load balancer.
	HAProxyProcesses int
	// HAProxyLanding sizes the landing process
	// (haproxydriver.Config.Landing).
	HAProxyLanding render.LandingOptions
	// ApplyConcurrency bounds the load balancers applied at once
	// (agent.Config.ApplyConcurrency).
	ApplyConcurrency int
	// RatesEvery is agent.Config.RatesEvery.
	RatesEvery      time.Duration
	APIAddr         string
	APIAllowedHosts []string // host names the API answers besides its address (api.Server.AllowedHosts)
	Render          render.Options
	// AccessLog receives the access-log lines (haproxydriver.Config.AccessLog).
	AccessLog io.Writer

	// LeaseNamespace holds the agents' heartbeat Leases (the
	// controller's --lease-namespace). The Lease is renewed every
	// HeartbeatInterval and expires HeartbeatTimeout after its last
	// renewal (whole seconds: a Lease counts its duration in seconds).
	LeaseNamespace    string
	HeartbeatInterval time.Duration
	HeartbeatTimeout  time.Duration
	// VRRPInterface, when set, makes the agent hold the addresses with
	// keepalived on that interface; empty: addresses are someone else's
	// business.
	VRRPInterface    string
	KeepalivedBinary string
	// VRRPAdvert is the VRRP advert interval (--vrrp-advert-interval);
	// 0 is vrrp.DefaultAdvert.
	VRRPAdvert time.Duration
	// OnExit is what a SIGTERM does to this node's addresses and
	// placements (ExitStay, ExitHandOver, ExitDrain).
	OnExit ExitMode
	// BGP, when set, advertises the addresses to routers instead of
	// VRRP (flags --bgp-*).
	BGP *bgp.Config
	// BGPECMP advertises the native load balancers of an ECMP placement
	// with equal preference (--bgp-ecmp).
	BGPECMP bool
	// BGPPreempt sends the traffic back to the active node as soon as it
	// serves again (--bgp-preempt); without, the standby that took over
	// keeps it.
	BGPPreempt bool
}

// ExitMode is what an agent does with its node's share of the traffic
// when it is told to stop (SIGTERM).
type ExitMode string

const (
	// ExitStay moves nothing: HAProxy and keepalived outlive the agent
	// (a systemd unit whose restart adopts them) and the Lease simply
	// expires if the agent does not come back.
	ExitStay ExitMode = "stay"
	// ExitHandOver hands every address this node holds to the standby
	// nodes, stops HAProxy gracefully so that requests under way finish,
	// then exits, keeping the placements: the node's Lease stays and expires only if the agent
	// is not back within the heartbeat timeout. In a pod HAProxy dies
	// with the agent's container, so every stop of the pod (a rollout, a
	// deletion, an eviction) must be a planned handover; a restarted
	// agent comes back as a hot standby and moves nothing.
	ExitHandOver ExitMode = "handover"
	// ExitDrain is ExitHandOver plus deleting the Lease, so the
	// controller re-places this node's load balancers at once: for a node
	// that leaves for good.
	ExitDrain ExitMode = "drain"
)

// ParseExitMode reads --on-exit.
func ParseExitMode(s string) (ExitMode, error) {
	switch m := ExitMode(s); m {
	case ExitStay, ExitHandOver, ExitDrain:
		return m, nil
	}
	return "", fmt.Errorf("--on-exit %q: want stay, handover or drain", s)
}

func (cfg AgentConfig) validate() error {
	switch {
	case cfg.Node == "":
		return errors.New("--node is required (the Node name this agent runs on)")
	case cfg.LeaseNamespace == "":
		return errors.New("--lease-namespace is required (where the agents' heartbeat Leases live)")
	case cfg.HeartbeatInterval <= 0:
		return fmt.Errorf("--heartbeat-interval %s: must be positive", cfg.HeartbeatInterval)
	case cfg.BGP != nil && cfg.VRRPInterface != "":
		return errors.New("--bgp-peer and --vrrp-interface exclude each other: pick one way to move the addresses (docs/bgp.md)")
	case cfg.VRRPAdvert != 0 && vrrp.CheckAdvert(cfg.VRRPAdvert) != nil:
		return fmt.Errorf("--vrrp-advert-interval: %w", vrrp.CheckAdvert(cfg.VRRPAdvert))
	case cfg.HeartbeatTimeout <= cfg.HeartbeatInterval:
		// One late renewal must not make the node look dead.
		return fmt.Errorf("--heartbeat-timeout %s must be longer than --heartbeat-interval %s", cfg.HeartbeatTimeout, cfg.HeartbeatInterval)
	}
	return nil
}

// handedOverGrace bounds HAProxy's soft stop when an agent that handed
// its addresses over exits. Once the standby holds them, a connection
// still open here gets its client's packets only while the new holder
// hands them back (addrhold: 0.7 s after it becomes MASTER, within this
// node's 1 s linger); after that nothing on it can be served, and waiting
// for HAProxy's hard-stop-after (1 min by default) would only hold up a
// rollout. The margin covers a slow machine.
const handedOverGrace = 5 * time.Second

// drivers builds this node's data planes: HAProxy for Ingresses and
// Gateways, nftables for Services of type LoadBalancer.
func (cfg AgentConfig) drivers(stateDir string, secrets haproxydriver.Secrets, configMaps haproxydriver.ConfigMaps, m *metrics.Metrics, logger *slog.Logger) ([]driver.Driver, error) {
	var exitGrace time.Duration
	if cfg.OnExit != ExitStay {
		exitGrace = handedOverGrace
	}
	hd, err := haproxydriver.New(haproxydriver.Config{StateDir: stateDir, Binary: cfg.HAProxyBinary, Processes: cfg.HAProxyProcesses,
		ExitGrace: exitGrace, Landing: cfg.HAProxyLanding, Render: cfg.Render, Secrets: secrets, ConfigMaps: configMaps, AccessLog: cfg.AccessLog, Metrics: m, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("haproxy driver: %w", err)
	}
	// A Gateway's UDP listeners are served by nftables beside HAProxy.
	haproxy, native := splitdriver.New(hd, nativedriver.NewOrUnavailable(nativedriver.Config{StateDir: stateDir, Logger: logger}))
	return []driver.Driver{haproxy, native}, nil
}

// mover builds what moves this node's addresses: keepalived
// (--vrrp-interface), a BGP speaker (--bgp-peer), or nothing.
func (cfg AgentConfig) mover(stateDir string, peers addrhold.Heartbeats, m *metrics.Metrics, logger *slog.Logger) (mover.Mover, error) {
	switch {
	case cfg.VRRPInterface != "":
		mv, err := addrhold.NewMover(addrhold.Config{Node: cfg.Node, Interface: cfg.VRRPInterface, Dir: addrhold.DefaultDir(stateDir),
			Advert: cfg.VRRPAdvert, KeepalivedBinary: cfg.KeepalivedBinary, Metrics: m, Logger: logger.With("component", "vrrp")}, peers)
		if err != nil {
			return nil, fmt.Errorf("vrrp: %w", err)
		}
		return mv, nil
	case cfg.BGP != nil:
		return bgp.NewMover(bgp.MoverConfig{Speaker: *cfg.BGP, Node: cfg.Node, ECMP: cfg.BGPECMP, Preempt: cfg.BGPPreempt, Metrics: m, Logger: logger}), nil
	}
	return nil, nil
}

// RunAgent runs `pier agent` until ctx ends. HAProxy is left running when
// the agent exits: restarting the agent drops no request, and the next
// agent adopts the running instances (reloading only changed ones).
//
// The heartbeat, the peers' Leases and the cordon watch outlive ctx until
// the agent's Run has returned: a drain on exit still needs its Lease
// fresh and its peers known. Only then, with --on-exit=drain, is the
// Lease deleted; otherwise the Lease stays and expires, so a restarting
// agent (a rolling update) moves no placement.
func RunAgent(ctx context.Context, cfg AgentConfig, logger *slog.Logger) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	stateDir, err := statedir.Prepare(cfg.StateDir)
	if err != nil {
		return err
	}
	bridgeKlog(logger)
	if err := cfg.APIRate.validate("--kube-api"); err != nil {
		return err
	}
	restCfg, err := RestConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg = cfg.APIRate.apply(restCfg, DefaultAgentAPIRate)
	_, client, st, err := connect(restCfg, nil, cfg.Node, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := checkLeaseNamespace(ctx, client, cfg.LeaseNamespace); err != nil {
		return err
	}
	bg, stopBg := context.WithCancel(context.Background())
	defer stopBg()
	peers, err := startLeaseHeartbeats(ctx, bg, client, cfg.LeaseNamespace)
	if err != nil {
		return err
	}
	m := metrics.New()
	drivers, err := cfg.drivers(stateDir, apiSecrets{client}, apiSecrets{client}, m, logger)
	if err != nil {
		return err
	}
	mv, err := cfg.mover(stateDir, peers, m, logger)
	if err != nil {
		return err
	}
	a := agent.New(agent.Config{
		Node: cfg.Node, Store: st, Drivers: drivers, ApplyConcurrency: cfg.ApplyConcurrency, RatesEvery: cfg.RatesEvery, Metrics: m, Logger: logger,
		Mover: mv, HandOverOnExit: cfg.OnExit != ExitStay,
		// Handed over, the data plane has no traffic left to keep: HAProxy
		// stops gracefully, finishing the requests under way (a request
		// that began before the move is handed back to this node), rather
		// than dying with the pod's container in the middle of them.
		StopOnExit: cfg.OnExit != ExitStay,
	})
	hb := newHeartbeat(client, cfg, a.ReportsWrittenAt, logger)
	var background sync.WaitGroup
	background.Go(func() { hb.run(bg) })
	background.Go(func() {
		if err := watchCordon(bg, client, cfg.Node, a.SetDraining, logger); err != nil {
			logger.Error("cordon watch", "error", err)
		}
	})
	logger.Info("pier agent started", "node", cfg.Node, "state_dir", stateDir, "vrrp_interface", cfg.VRRPInterface,
		"heartbeat_interval", cfg.HeartbeatInterval, "heartbeat_timeout", cfg.HeartbeatTimeout, "on_exit", cfg.OnExit)
	runErr := runAgentLoop(ctx, cfg, a, st, m, logger)
	stopBg()
	background.Wait() // no renewal may recreate the Lease deleted below
	stopped := runErr == nil && ctx.Err() != nil
	if stopped && cfg.OnExit != ExitStay {
		// The data plane has stopped: if pier is being removed, leave
		// the node as it was before it came.
		if gone, why := uninstalled(context.Background(), client, podFromEnv()); gone {
			logger.Info("uninstall: pier is being removed from the cluster; removing what it made on this node", "why", why)
			removeState(stateDir, logger)
			hb.remove()
			return nil
		}
	}
	if stopped && cfg.OnExit == ExitDrain {
		hb.remove()
	}
	return runErr
}

// runAgentLoop runs the agent and its HTTP API until ctx ends or the
// agent stops.
func runAgentLoop(ctx context.Context, cfg AgentConfig, a *agent.Agent, st *kubestore.Store, m *metrics.Metrics,
	logger *slog.Logger) error {
	g, ctx := errgroup.WithContext(ctx)
	if cfg.APIAddr != "" {
		srv := &api.Server{Store: st, Ingresses: noIngresses{}, Registry: m.Registry, Logger: logger,
			Healthy: a.Alive, Ready: a.Ready, AllowedHosts: cfg.APIAllowedHosts}
		g.Go(func() error {
			// The API is for operators: the node keeps serving without it.
			if err := srv.ListenAndServe(ctx, cfg.APIAddr); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error("api server", "error", err)
			}
			return nil
		})
	}
	g.Go(func() error { return orCanceled(a.Run(ctx)) })
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// apiSecrets reads TLS Secrets from the API server when a certificate is
// applied, and basic-auth Secrets when a load balancer with basic auth is
// rendered (on each apply); and the ConfigMaps of a listener's client
// CAs, likewise.
type apiSecrets struct{ client kubernetes.Interface }

func (s apiSecrets) TLSPair(namespace, name string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sec, err := s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("get secret: %w", err)
	}
	return sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey], nil
}

// ConfigMapData reads a ConfigMap of a listener's client CAs when its
// load balancer is applied, as TLSPair reads a Secret.
func (s apiSecrets) ConfigMapData(namespace, name string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cm, err := s.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get config map: %w", err)
	}
	return cm.Data, nil
}

// Data reads the Secret of a policy's basic auth, as TLSPair does.
func (s apiSecrets) Data(namespace, name string) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sec, err := s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get secret: %w", err)
	}
	return sec.Data, nil
}
