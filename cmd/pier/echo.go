package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"pier.dev/pier/internal/echo"
)

func echoCommand(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg echo.Config
	var logs logFlags
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:3000", "address to listen on")
	fs.StringVar(&cfg.Namespace, "namespace", os.Getenv("NAMESPACE"), "namespace to report (env NAMESPACE)")
	fs.StringVar(&cfg.Ingress, "ingress", os.Getenv("INGRESS_NAME"), "ingress name to report (env INGRESS_NAME)")
	fs.StringVar(&cfg.Service, "service", os.Getenv("SERVICE_NAME"), "service name to report (env SERVICE_NAME)")
	fs.StringVar(&cfg.Pod, "pod", os.Getenv("POD_NAME"), "pod name to report (env POD_NAME)")
	fs.DurationVar(&cfg.ShutdownDelay, "shutdown-delay", 0,
		"on SIGTERM, keep serving this long before shutting down (what a preStop sleep gives an app in a pod: the load balancers drop its endpoint first)")
	logs.register(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: pier echo [--listen ADDR] [--service NAME] [--pod NAME] …

An HTTP backend for demos and tests. Every path but /health answers with a JSON
description of the request (path, host, method, proto, headers) and of where it
landed (namespace, ingress, service, pod), like the Ingress conformance echo server.

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
	return echo.Run(ctx, cfg, logger)
}
