package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/vrrp"
)

func agentCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var a agentFlags
	a.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: pier agent --node NAME [--kubeconfig FILE] [flags]

The node role: watches the LoadBalancer custom resources placed on this node
(active or standby) and runs each with HAProxy — render, check, start, reload,
or change members through the runtime API — and reports what it applied in the
LoadBalancer status. By default HAProxy keeps serving when the agent exits
and the next agent adopts it (a host install). In a pod HAProxy dies with the
agent's container: run it with --on-exit=handover, so that a SIGTERM (a
rollout, a pod deletion, an eviction) hands this node's addresses to the
standby nodes and lets requests under way finish first. /readyz answers 200
once every load balancer placed here is applied and serves, so a rollout
waits for it before it stops the next node's agent.

The agent renews a heartbeat Lease; the controller places load balancers only
on nodes whose Lease is fresh and moves them off a node whose Lease expires.
With --vrrp-interface it also holds the VIPs and FIPs: keepalived speaks VRRP
with the peer node, MASTER where the load balancer is active, BACKUP where it
is standby, so the addresses follow the active HAProxy. A cordoned node
(kubectl cordon) drains: it hands its addresses to the standby nodes and gets
no new load balancer.

With --bgp-peer instead (networks without a shared L2 segment, the seeds'
way), every node a load balancer is placed on advertises its VIP and FIP as
host routes while its HAProxy serves, the active node's preferred (iBGP:
LOCAL_PREF 200/100; eBGP: MED and AS-path prepend), and withdraws them when
HAProxy is unhealthy or the node drains. With --bgp-ecmp, the native load
balancers the controller places on every node (--native-ecmp) are advertised
by each node with equal preference: ECMP, the routers spread the flows and
each node DNATs them in the kernel by one consistent hash. With --bgp-bfd, a
BFD session with every peer lets a router drop a node that stopped answering
within 300 ms instead of the hold time. See docs/bgp.md.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := a.logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := a.config(logger)
	if err != nil {
		return err
	}
	out, closeOut, err := a.haproxy.accessLogOutput()
	if err != nil {
		return err
	}
	defer closeOut()
	cfg.AccessLog = out
	return cluster.RunAgent(ctx, cfg, logger.With("node", cfg.Node))
}

// agentFlags are pier agent's flags: register declares them, config
// checks them and makes the cluster.AgentConfig.
type agentFlags struct {
	cfg         cluster.AgentConfig
	onExit      string
	drainOnExit bool
	logs        logFlags
	haproxy     haproxyFlags
	bgpf        bgpFlags
}

// register declares the flags in the order -help lists them.
func (a *agentFlags) register(fs *flag.FlagSet) {
	kubeconfigFlag(fs, &a.cfg.Kubeconfig)
	apiRateFlags(fs, &a.cfg.APIRate, cluster.DefaultAgentAPIRate)
	fs.StringVar(&a.cfg.Node, "node", os.Getenv("NODE_NAME"), "name of the Node this agent runs on (env NODE_NAME)")
	fs.StringVar(&a.cfg.StateDir, "state-dir", cluster.DefaultAgentStateDir, "folder for the per-load-balancer HAProxy folders")
	apiAddrFlag(fs, &a.cfg.APIAddr, &a.cfg.APIAllowedHosts, "127.0.0.1:8083",
		"address of the agent's /healthz (liveness: its loop turns), /readyz (readiness: every load balancer placed here is applied and serves) and /metrics; in a pod, $(POD_IP):8083 so the kubelet and Prometheus reach it; empty to disable")
	fs.StringVar(&a.cfg.LeaseNamespace, "lease-namespace", "pier-system",
		"namespace of this node's heartbeat Lease pier-agent-<node> (the controller's --lease-namespace)")
	fs.DurationVar(&a.cfg.HeartbeatInterval, "heartbeat-interval", 2*time.Second, "how often the heartbeat Lease is renewed")
	fs.DurationVar(&a.cfg.HeartbeatTimeout, "heartbeat-timeout", 10*time.Second,
		"how long after its last renewal the Lease expires (rounded up to whole seconds); the controller then moves this node's load balancers to their standby nodes")
	fs.StringVar(&a.cfg.VRRPInterface, "vrrp-interface", "",
		"hold the load balancers' VIPs and FIPs with VRRP (keepalived) on this interface: the active node holds them, the standby takes them over when it fails; empty: pier does not touch addresses, they are someone else's business (a cloud, MetalLB, static routes)")
	fs.StringVar(&a.cfg.KeepalivedBinary, "keepalived-binary", "keepalived", "keepalived binary, used with --vrrp-interface")
	fs.DurationVar(&a.cfg.VRRPAdvert, "vrrp-advert-interval", vrrp.DefaultAdvert,
		"with --vrrp-interface: VRRP advert interval, whole centiseconds (10ms-40s); the standby takes over about 3 intervals after the active node's last advert (a cut link: 0.3 s at the default), and keepalived's CPU grows with 1/interval")
	fs.DurationVar(&a.cfg.RatesEvery, "report-rates-every", time.Minute,
		"the window over which each load balancer's requests per second and 5xx share are measured for its status (the web view, pier get); a change of them is a status write, at most one a window per load balancer with traffic, from the node that holds it; 0 reports no rates (thousands of load balancers per node at the default --kube-api-qps)")
	fs.StringVar(&a.onExit, "on-exit", string(cluster.ExitStay),
		"what SIGTERM does: stay (move nothing; HAProxy outlives the agent, for a host install), handover (hand the addresses this node holds to the standby nodes and let requests under way finish, keeping the placements: for a pod, whose HAProxy dies with it) or drain (handover, then delete the heartbeat Lease so the controller re-places this node's load balancers at once)")
	fs.BoolVar(&a.drainOnExit, "drain-on-exit", false, "the same as --on-exit=drain (kept for old command lines)")
	a.bgpf.register(fs)
	a.haproxy.register(fs)
	a.logs.register(fs)
}

// config checks the parsed flags and fills the cluster.AgentConfig with
// them.
func (a *agentFlags) config(logger *slog.Logger) (cluster.AgentConfig, error) {
	cfg := a.cfg
	var err error
	if cfg.BGP, err = a.bgpf.config(); err != nil {
		return cfg, err
	}
	if a.bgpf.ecmp && cfg.BGP == nil {
		return cfg, fmt.Errorf("--bgp-ecmp needs --bgp-peer: ECMP spreads the flows by the routers' multipath")
	}
	cfg.BGPECMP, cfg.BGPPreempt = a.bgpf.ecmp, a.bgpf.preempt
	if cfg.OnExit, err = cluster.ParseExitMode(a.onExit); err != nil {
		return cfg, err
	}
	if a.drainOnExit {
		cfg.OnExit = cluster.ExitDrain
	}
	cfg.HAProxyBinary, cfg.HAProxyProcesses, cfg.ApplyConcurrency = a.haproxy.binary, a.haproxy.processes, a.haproxy.applies
	if cfg.Render, err = a.haproxy.render(logger); err != nil {
		return cfg, err
	}
	// In Kubernetes mode the HTTP listeners are on translate's default
	// port.
	if cfg.HAProxyLanding, err = a.haproxy.landingOptions(80); err != nil {
		return cfg, err
	}
	return cfg, nil
}
