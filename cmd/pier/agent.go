package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"pier.dev/pier/internal/cluster"
)

func agentCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg     cluster.AgentConfig
		logs    logFlags
		haproxy haproxyFlags
	)
	kubeconfigFlag(fs, &cfg.Kubeconfig)
	fs.StringVar(&cfg.Node, "node", os.Getenv("NODE_NAME"), "name of the Node this agent runs on (env NODE_NAME)")
	fs.StringVar(&cfg.StateDir, "state-dir", cluster.DefaultAgentStateDir, "folder for the per-load-balancer HAProxy folders")
	apiAddrFlag(fs, &cfg.APIAddr, "127.0.0.1:8083", "address of the agent's /healthz and /metrics; empty to disable")
	haproxy.register(fs)
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
	cfg.HAProxyBinary = haproxy.binary
	cfg.Render = haproxy.render()
	return cluster.RunAgent(ctx, cfg, logger.With("node", cfg.Node))
}
