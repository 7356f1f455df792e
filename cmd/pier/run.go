package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"pier.dev/pier/internal/bfd"
	"pier.dev/pier/internal/standalone"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/internal/vrrp"
)

func runCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var r runFlags
	r.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: pier run -f PATH [-f PATH …] [flags]

Runs the whole pier pipeline in one process: manifests (Ingress, IngressClass,
Service, EndpointSlice, TLS Secret) are read from files and watched; each
Ingress of our class becomes a load balancer with a VIP (and a floating IP)
served by its own HAProxy. Edits are applied within a second.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if len(r.paths) == 0 {
		fmt.Fprintln(stderr, "pier run: at least one -f PATH is required")
		fs.Usage()
		return errUsage
	}
	logger, err := r.logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := r.config(fs, logger)
	if err != nil {
		return err
	}
	out, closeOut, err := r.haproxy.accessLogOutput()
	if err != nil {
		return err
	}
	defer closeOut()
	cfg.AccessLog = out
	return standalone.Run(ctx, cfg, logger)
}

// runFlags are pier run's flags: register declares them, config checks
// them and makes the standalone.Config.
type runFlags struct {
	paths   stringList
	cfg     standalone.Config
	bfdMult uint
	logs    logFlags
	pools   poolFlags
	tr      translateFlags
	st      statusFlags
	haproxy haproxyFlags
}

// register declares the flags in the order -help lists them.
func (r *runFlags) register(fs *flag.FlagSet) {
	fs.Var(&r.paths, "f", "manifest file or folder (repeatable); YAML or JSON, multi-document; watched for changes")
	fs.StringVar(&r.cfg.StateDir, "state-dir", ".pier-state", "folder for pier's database and the per-load-balancer HAProxy folders")
	fs.StringVar(&r.cfg.Node, "node", "local", "name of this node in load balancer placements (one node only)")
	fs.IntVar(&r.cfg.Nodes, "nodes", 1, "number of nodes; 2 or more runs the active/standby pair without a cluster: each node is a network\n"+
		"namespace (<lab-prefix>n0, n1, …) on one bridge with its own HAProxy and keepalived, plus a client host\n"+
		"(<lab-prefix>c) and a pods host (<lab-prefix>pods, where backends run); VIPs and FIPs then come from\n"+
		standalone.LabInternalPool+" and "+standalone.LabPublicPool+" unless the pool flags say otherwise. Needs root;\n"+
		"every namespace is removed on exit. A Node manifest with spec.unschedulable: true drains that node")
	fs.BoolVar(&r.cfg.ECMP, "ecmp", false, "with --nodes: ECMP instead of the pair for Services of type LoadBalancer: every node serves them at once and advertises their\n"+
		"VIPs over BGP to a router namespace (<lab-prefix>r, bird2 with multipath), through which the client host reaches the pools; the\n"+
		"other load balancers keep their pair, moved by BGP instead of VRRP (docs/bgp.md)")
	fs.BoolVar(&r.cfg.BFD.Enabled, "bgp-bfd", false, "with --ecmp: BFD between the router and every node (bird's \"bfd on\"), so that a node cut off is out of the router's routes\n"+
		"within --bgp-bfd-multiplier × --bgp-bfd-interval (300 ms) instead of the 3 s hold time")
	fs.DurationVar(&r.cfg.BFD.Interval, "bgp-bfd-interval", bfd.DefaultInterval, "with --bgp-bfd: BFD packet interval once up, both ways")
	fs.UintVar(&r.bfdMult, "bgp-bfd-multiplier", bfd.DefaultMultiplier, "with --bgp-bfd: BFD packets in a row that may be lost")
	fs.StringVar(&r.cfg.LabPrefix, "lab-prefix", "pier-", "prefix of the network namespaces --nodes creates")
	fs.StringVar(&r.cfg.KeepalivedBinary, "keepalived-binary", "keepalived", "keepalived to run on each node with --nodes")
	fs.DurationVar(&r.cfg.VRRPAdvert, "vrrp-advert-interval", vrrp.DefaultAdvert,
		"with --nodes: the nodes' VRRP advert interval, whole centiseconds (10ms-40s); the standby takes over about 3 intervals after the active node's last advert")
	r.pools.register(fs, "127.10.0.0/16", "CIDR the internal VIPs are allocated from (loopback by default: no network set-up needed)", "127.20.0.0/16")
	routerIDFlag(fs, &r.cfg.RouterIDs)
	apiAddrFlag(fs, &r.cfg.APIAddr, &r.cfg.APIAllowedHosts, "127.0.0.1:8082", apiUsage)
	r.tr.register(fs)
	r.tr.registerPorts(fs)
	r.haproxy.register(fs)
	r.st.register(fs)
	r.logs.register(fs)
}

// config checks the parsed flags (fs tells which were set) and fills
// the standalone.Config with them.
func (r *runFlags) config(fs *flag.FlagSet, logger *slog.Logger) (standalone.Config, error) {
	cfg := r.cfg
	var err error
	cfg.Paths = r.paths
	if cfg.BFD.Enabled && !cfg.ECMP {
		return cfg, fmt.Errorf("--bgp-bfd needs --ecmp: only the ECMP lab's nodes speak BGP")
	}
	if cfg.BFD.Interval < bfd.MinInterval || cfg.BFD.Interval > bfd.MaxInterval {
		return cfg, fmt.Errorf("--bgp-bfd-interval %s: %s to %s", cfg.BFD.Interval, bfd.MinInterval, bfd.MaxInterval)
	}
	if r.bfdMult < 1 || r.bfdMult > 255 {
		return cfg, fmt.Errorf("--bgp-bfd-multiplier %d: 1 to 255", r.bfdMult)
	}
	cfg.BFD.Multiplier = int(r.bfdMult)
	cfg.InternalPool, cfg.PublicPool = r.pools.internal, r.pools.public
	cfg.AddressQuarantine = r.pools.quarantine
	if cfg.Nodes >= 2 {
		// Loopback VIPs cannot move between nodes: take the lab's pools
		// unless the operator chose others.
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["internal-pool"] {
			cfg.InternalPool = standalone.LabInternalPool
		}
		if !set["public-pool"] {
			cfg.PublicPool = standalone.LabPublicPool
		}
	}
	if cfg.ECMP && cfg.Nodes < 2 {
		return cfg, fmt.Errorf("--ecmp needs --nodes 2 or more: ECMP spreads the flows over several nodes")
	}
	if err := vrrp.CheckAdvert(cfg.VRRPAdvert); err != nil {
		return cfg, fmt.Errorf("--vrrp-advert-interval: %w", err)
	}
	if cfg.Quota, err = r.pools.quotaFor(cfg.InternalPool, cfg.PublicPool); err != nil {
		return cfg, err
	}
	if cfg.Translate, err = r.tr.options(); err != nil {
		return cfg, err
	}
	// pier run's manifests are the operator's own and its examples serve
	// from 127.0.0.1: loopback endpoints are allowed, but not pier's API
	// and not the pools' addresses.
	if cfg.Translate.Members, err = translate.NewMemberPolicy(true, cfg.APIAddr, cfg.InternalPool, cfg.PublicPool); err != nil {
		return cfg, err
	}
	cfg.Status = r.st.value()
	cfg.HAProxyBinary, cfg.HAProxyProcesses, cfg.ApplyConcurrency = r.haproxy.binary, r.haproxy.processes, r.haproxy.applies
	if cfg.Render, err = r.haproxy.render(logger); err != nil {
		return cfg, err
	}
	if cfg.HAProxyLanding, err = r.haproxy.landingOptions(r.tr.opts.HTTPPort); err != nil {
		return cfg, err
	}
	return cfg, nil
}
