package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"pier.dev/pier/internal/bfd"
	"pier.dev/pier/internal/standalone"
	"pier.dev/pier/internal/translate"
	"pier.dev/pier/internal/vrrp"
)

func runCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		paths   stringList
		cfg     standalone.Config
		logs    logFlags
		pools   poolFlags
		tr      translateFlags
		st      statusFlags
		haproxy haproxyFlags
	)
	fs.Var(&paths, "f", "manifest file or folder (repeatable); YAML or JSON, multi-document; watched for changes")
	fs.StringVar(&cfg.StateDir, "state-dir", ".pier-state", "folder for pier's database and the per-load-balancer HAProxy folders")
	fs.StringVar(&cfg.Node, "node", "local", "name of this node in load balancer placements (one node only)")
	fs.IntVar(&cfg.Nodes, "nodes", 1, "number of nodes; 2 or more runs the active/standby pair without a cluster: each node is a network\n"+
		"namespace (<lab-prefix>n0, n1, …) on one bridge with its own HAProxy and keepalived, plus a client host\n"+
		"(<lab-prefix>c) and a pods host (<lab-prefix>pods, where backends run); VIPs and FIPs then come from\n"+
		standalone.LabInternalPool+" and "+standalone.LabPublicPool+" unless the pool flags say otherwise. Needs root;\n"+
		"every namespace is removed on exit. A Node manifest with spec.unschedulable: true drains that node")
	fs.BoolVar(&cfg.ECMP, "ecmp", false, "with --nodes: ECMP instead of the pair for Services of type LoadBalancer: every node serves them at once and advertises their\n"+
		"VIPs over BGP to a router namespace (<lab-prefix>r, bird2 with multipath), through which the client host reaches the pools; the\n"+
		"other load balancers keep their pair, moved by BGP instead of VRRP (docs/bgp.md)")
	fs.BoolVar(&cfg.BFD.Enabled, "bgp-bfd", false, "with --ecmp: BFD between the router and every node (bird's \"bfd on\"), so that a node cut off is out of the router's routes\n"+
		"within --bgp-bfd-multiplier × --bgp-bfd-interval (300 ms) instead of the 3 s hold time")
	fs.DurationVar(&cfg.BFD.Interval, "bgp-bfd-interval", bfd.DefaultInterval, "with --bgp-bfd: BFD packet interval once up, both ways")
	var bfdMult uint
	fs.UintVar(&bfdMult, "bgp-bfd-multiplier", bfd.DefaultMultiplier, "with --bgp-bfd: BFD packets in a row that may be lost")
	fs.StringVar(&cfg.LabPrefix, "lab-prefix", "pier-", "prefix of the network namespaces --nodes creates")
	fs.StringVar(&cfg.KeepalivedBinary, "keepalived-binary", "keepalived", "keepalived to run on each node with --nodes")
	fs.DurationVar(&cfg.VRRPAdvert, "vrrp-advert-interval", vrrp.DefaultAdvert,
		"with --nodes: the nodes' VRRP advert interval, whole centiseconds (10ms-40s); the standby takes over about 3 intervals after the active node's last advert")
	pools.register(fs, "127.10.0.0/16", "CIDR the internal VIPs are allocated from (loopback by default: no network set-up needed)", "127.20.0.0/16")
	routerIDFlag(fs, &cfg.RouterIDs)
	apiAddrFlag(fs, &cfg.APIAddr, &cfg.APIAllowedHosts, "127.0.0.1:8082", apiUsage)
	tr.register(fs)
	tr.registerPorts(fs)
	haproxy.register(fs)
	st.register(fs)
	logs.register(fs)
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
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "pier run: at least one -f PATH is required")
		fs.Usage()
		return errUsage
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg.Paths = paths
	if cfg.BFD.Enabled && !cfg.ECMP {
		return fmt.Errorf("--bgp-bfd needs --ecmp: only the ECMP lab's nodes speak BGP")
	}
	if cfg.BFD.Interval < bfd.MinInterval || cfg.BFD.Interval > bfd.MaxInterval {
		return fmt.Errorf("--bgp-bfd-interval %s: %s to %s", cfg.BFD.Interval, bfd.MinInterval, bfd.MaxInterval)
	}
	if bfdMult < 1 || bfdMult > 255 {
		return fmt.Errorf("--bgp-bfd-multiplier %d: 1 to 255", bfdMult)
	}
	cfg.BFD.Multiplier = int(bfdMult)
	cfg.InternalPool, cfg.PublicPool = pools.internal, pools.public
	cfg.AddressQuarantine = pools.quarantine
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
		return fmt.Errorf("--ecmp needs --nodes 2 or more: ECMP spreads the flows over several nodes")
	}
	if err := vrrp.CheckAdvert(cfg.VRRPAdvert); err != nil {
		return fmt.Errorf("--vrrp-advert-interval: %w", err)
	}
	if cfg.Quota, err = pools.quotaFor(cfg.InternalPool, cfg.PublicPool); err != nil {
		return err
	}
	if cfg.Translate, err = tr.options(); err != nil {
		return err
	}
	// pier run's manifests are the operator's own and its examples serve
	// from 127.0.0.1: loopback endpoints are allowed, but not pier's API
	// and not the pools' addresses.
	if cfg.Translate.Members, err = translate.NewMemberPolicy(true, cfg.APIAddr, cfg.InternalPool, cfg.PublicPool); err != nil {
		return err
	}
	cfg.Status = st.value()
	cfg.HAProxyBinary, cfg.HAProxyProcesses, cfg.ApplyConcurrency = haproxy.binary, haproxy.processes, haproxy.applies
	if cfg.Render, err = haproxy.render(logger); err != nil {
		return err
	}
	if cfg.HAProxyLanding, err = haproxy.landingOptions(tr.opts.HTTPPort); err != nil {
		return err
	}
	out, closeOut, err := haproxy.accessLogOutput()
	if err != nil {
		return err
	}
	defer closeOut()
	cfg.AccessLog = out
	return standalone.Run(ctx, cfg, logger)
}
