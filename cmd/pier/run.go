package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/standalone"
	"pier.dev/pier/internal/translate"
)

func runCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		paths    stringList
		cfg      standalone.Config
		logs     logFlags
		static   stringList
		slots    int
		hardStop time.Duration
	)
	topts := translate.DefaultOptions()
	fs.Var(&paths, "f", "manifest file or folder (repeatable); YAML or JSON, multi-document; watched for changes")
	fs.StringVar(&cfg.StateDir, "state-dir", ".pier-state", "folder for pier's database and the per-load-balancer HAProxy folders")
	fs.StringVar(&cfg.InternalPool, "internal-pool", "127.10.0.0/16", "CIDR the internal VIPs are allocated from (loopback by default: no network set-up needed)")
	fs.StringVar(&cfg.PublicPool, "public-pool", "127.20.0.0/16", "CIDR the floating IPs are allocated from; empty for none")
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:8082", "address of the read-only HTTP API (/loadbalancers, /ingresses/NS/NAME, /healthz, /metrics)")
	fs.IntVar(&topts.HTTPPort, "http-port", 80, "port HAProxy listens on for HTTP on every VIP and FIP")
	fs.IntVar(&topts.HTTPSPort, "https-port", 443, "port HAProxy listens on for HTTPS (only load balancers with TLS certificates)")
	fs.StringVar(&cfg.Node, "node", "local", "name of this node in load balancer placements")
	fs.StringVar(&cfg.HAProxyBinary, "haproxy", "haproxy", "HAProxy binary (2.6 or later)")
	fs.StringVar(&topts.ControllerName, "controller-name", translate.DefaultControllerName, "IngressClass spec.controller value that selects pier's classes")
	fs.BoolVar(&topts.TakeClassless, "classless-ingresses", false, "also serve Ingresses that name no class when no IngressClass of ours is the default")
	fs.BoolVar(&topts.MembersFromClusterIP, "members-from-cluster-ip", false, "proxy to the Service ClusterIP instead of the ready endpoints (the seed's two-hop mode)")
	fs.IntVar(&topts.MaxIngresses, "max-ingresses", topts.MaxIngresses, "refuse Ingresses beyond this many (newest first)")
	fs.IntVar(&topts.MaxPathsPerIngress, "max-paths-per-ingress", topts.MaxPathsPerIngress, "refuse an Ingress with more paths than this")
	fs.IntVar(&slots, "server-slots", 16, "minimum server slots per backend; endpoint changes within the slots need no HAProxy reload")
	fs.DurationVar(&hardStop, "hard-stop-after", time.Minute, "how long an old HAProxy worker may drain connections after a reload")
	fs.Var(&static, "status-address", "publish this address in every Ingress status instead of its VIP and FIP (repeatable)")
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
	cfg.Translate = topts
	cfg.Status.Static = static
	cfg.Render = render.Options{}
	cfg.Render.MinSlots = slots
	cfg.Render.HardStopAfter = hardStop
	return standalone.Run(ctx, cfg, logger)
}
