package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/translate"
)

func controllerCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg   cluster.ControllerConfig
		logs  logFlags
		pools poolFlags
		tr    translateFlags
		st    statusFlags
	)
	kubeconfigFlag(fs, &cfg.Kubeconfig)
	apiRateFlags(fs, &cfg.APIRate, cluster.DefaultControllerAPIRate)
	pools.register(fs, "10.250.0.0/16", "CIDR the internal VIPs are allocated from", "")
	routerIDFlag(fs, &cfg.RouterIDs)
	apiAddrFlag(fs, &cfg.APIAddr, &cfg.APIAllowedHosts, "127.0.0.1:8082", apiUsage)
	fs.StringVar(&cfg.WatchNamespace, "watch-namespace", "", "only watch Ingresses, Services, EndpointSlices, Secrets, Gateways, HTTPRoutes and ReferenceGrants in this namespace")
	fs.StringVar(&cfg.NodeSelector, "node-selector", "", "label selector of the nodes that may run HAProxy (default: every Ready node)")
	fs.StringVar(&cfg.LeaseNamespace, "lease-namespace", "pier-system", "namespace of the leader-election Lease and of the agents' heartbeat Leases (the agents' --lease-namespace)")
	fs.StringVar(&cfg.LeaseName, "lease-name", "pier-controller", "name of the leader-election Lease (distinct per pier installation)")
	allowLoopback := fs.Bool("allow-loopback-endpoints", false, "accept endpoints at loopback addresses as members (tests with every backend on one machine); never in a real cluster: they reach the node's own services")
	fs.BoolVar(&cfg.NativeECMP, "native-ecmp", false, "place each native load balancer (Service of type LoadBalancer) on every ready node instead of an active/standby pair, for ECMP: the agents must speak BGP with --bgp-ecmp (docs/bgp.md)")
	fs.StringVar(&cfg.Identity, "identity", "", "leader-election identity; default: hostname plus a random suffix")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", 15*time.Second, "leader-election lease duration")
	fs.DurationVar(&cfg.RenewDeadline, "renew-deadline", 10*time.Second, "leader-election renew deadline")
	fs.DurationVar(&cfg.RetryPeriod, "retry-period", 2*time.Second, "leader-election retry period")
	tr.register(fs)
	st.register(fs)
	st.registerService(fs)
	logs.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: pier controller [--kubeconfig FILE] [flags]

The kube-manager and service-monitor roles against a Kubernetes API server:
watches Ingresses of pier's IngressClasses, Services, EndpointSlices, TLS
Secrets and Nodes; turns each Ingress into a LoadBalancer custom resource
(loadbalancers.pier.dev) with a VIP and a floating IP, placed on an active and a
standby node; writes status.loadBalancer of every Ingress of our class once an
agent reports its load balancer serving; reports problems as Warning Events.
Run two replicas: a Lease elects the one that writes.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := logs.logger(stderr)
	if err != nil {
		return err
	}
	cfg.InternalPool, cfg.PublicPool = pools.internal, pools.public
	cfg.AddressQuarantine = pools.quarantine
	if cfg.Quota, err = pools.quotaFor(cfg.InternalPool, cfg.PublicPool); err != nil {
		return err
	}
	if cfg.Translate, err = tr.options(); err != nil {
		return err
	}
	if cfg.Translate.Members, err = translate.NewMemberPolicy(*allowLoopback, "", cfg.InternalPool, cfg.PublicPool); err != nil {
		return err
	}
	cfg.Status = st.value()
	if cfg.Status.Service != "" && len(cfg.Status.Static) > 0 {
		return fmt.Errorf("--status-service and --status-address exclude each other")
	}
	return cluster.RunController(ctx, cfg, logger)
}
