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
	var cfg cluster.ControllerConfig
	var logs logFlags
	var static stringList
	topts := translate.DefaultOptions()
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster configuration")
	fs.StringVar(&cfg.InternalPool, "internal-pool", "10.250.0.0/16", "CIDR the internal VIPs are allocated from")
	fs.StringVar(&cfg.PublicPool, "public-pool", "", "CIDR the floating IPs are allocated from; empty for none")
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:8082", "address of the read-only HTTP API (/loadbalancers, /ingresses/NS/NAME, /healthz, /metrics)")
	fs.StringVar(&cfg.WatchNamespace, "watch-namespace", "", "only watch Ingresses, Services, EndpointSlices and Secrets in this namespace")
	fs.StringVar(&cfg.NodeSelector, "node-selector", "", "label selector of the nodes that may run HAProxy (default: every Ready node)")
	fs.StringVar(&cfg.LeaseNamespace, "lease-namespace", "pier-system", "namespace of the leader-election Lease")
	fs.StringVar(&cfg.LeaseName, "lease-name", "pier-controller", "name of the leader-election Lease (distinct per pier installation)")
	fs.StringVar(&cfg.Identity, "identity", "", "leader-election identity; default: hostname plus a random suffix")
	fs.DurationVar(&cfg.LeaseDuration, "lease-duration", 15*time.Second, "leader-election lease duration")
	fs.DurationVar(&cfg.RenewDeadline, "renew-deadline", 10*time.Second, "leader-election renew deadline")
	fs.DurationVar(&cfg.RetryPeriod, "retry-period", 2*time.Second, "leader-election retry period")
	fs.StringVar(&topts.ControllerName, "controller-name", translate.DefaultControllerName, "IngressClass spec.controller value that selects pier's classes")
	fs.BoolVar(&topts.TakeClassless, "classless-ingresses", false, "also serve Ingresses that name no class when no IngressClass of ours is the default")
	fs.BoolVar(&topts.MembersFromClusterIP, "members-from-cluster-ip", false, "proxy to the Service ClusterIP instead of the ready endpoints (the seed's two-hop mode)")
	fs.IntVar(&topts.MaxIngresses, "max-ingresses", topts.MaxIngresses, "refuse Ingresses beyond this many (newest first)")
	fs.IntVar(&topts.MaxPathsPerIngress, "max-paths-per-ingress", topts.MaxPathsPerIngress, "refuse an Ingress with more paths than this")
	fs.StringVar(&cfg.Status.Service, "status-service", "", "publish the addresses of this Service's status.loadBalancer (namespace/name) in every Ingress status; with --watch-namespace it must live in that namespace")
	fs.Var(&static, "status-address", "publish this address in every Ingress status instead of its VIP and FIP (repeatable)")
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
	cfg.Translate = topts
	cfg.Status.Static = static
	if cfg.Status.Service != "" && len(static) > 0 {
		return fmt.Errorf("--status-service and --status-address exclude each other")
	}
	return cluster.RunController(ctx, cfg, logger)
}
