package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"pier.dev/pier/internal/cluster"
	"pier.dev/pier/internal/haproxy/render"
)

func agentCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg cluster.AgentConfig
	var logs logFlags
	var slots int
	var hardStop time.Duration
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster configuration")
	fs.StringVar(&cfg.Node, "node", os.Getenv("NODE_NAME"), "name of the Node this agent runs on (env NODE_NAME)")
	fs.StringVar(&cfg.StateDir, "state-dir", "/var/lib/pier", "folder for the per-load-balancer HAProxy folders")
	fs.StringVar(&cfg.HAProxyBinary, "haproxy", "haproxy", "HAProxy binary (2.6 or later)")
	fs.StringVar(&cfg.APIAddr, "api-addr", "127.0.0.1:8083", "address of the agent's /healthz and /metrics; empty to disable")
	fs.IntVar(&slots, "server-slots", 16, "minimum server slots per backend; endpoint changes within the slots need no HAProxy reload")
	fs.DurationVar(&hardStop, "hard-stop-after", time.Minute, "how long an old HAProxy worker may drain connections after a reload")
	logs.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: pier agent --node NAME [--kubeconfig FILE] [flags]

The node role: watches the LoadBalancer custom resources placed on this node
(active or standby) and runs each with HAProxy — render, check, start, reload,
or change members through the runtime API — and reports what it applied in the
LoadBalancer status. HAProxy keeps serving when the agent exits.

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
	cfg.Render = render.Options{MinSlots: slots, HardStopAfter: hardStop}
	return cluster.RunAgent(ctx, cfg, logger.With("node", cfg.Node))
}
