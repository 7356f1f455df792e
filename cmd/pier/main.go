// Command pier is a Kubernetes Ingress controller whose data plane is
// HAProxy. This file only dispatches to subcommands; each lives in its
// own file and turns flags into a config for a package under internal/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

const usage = `pier — a Kubernetes Ingress controller whose data plane is HAProxy.

Usage:
  pier <command> [flags]

Commands:
  run         Run the whole pipeline in one process on manifest files, with real
              HAProxy serving each Ingress on its own VIP (no cluster needed).
  controller  Run against a Kubernetes API server: Ingresses → LoadBalancer
              custom resources, addresses, status (leader-elected).
  agent       Run the node role: HAProxy for the LoadBalancers placed on a node.
  echo        Run an HTTP echo backend (for demos and tests).
  get         Show what a running pier holds: pier get loadbalancers|gateways|httproutes|routes [-o json].
  lint        Give the verdict pier would on each Ingress of manifests (coming from
              ingress-nginx): serves, serves with differences, refused and why, with
              haproxy -c: pier lint -f PATH... | --kubeconfig FILE [-v] [-o json].
  version     Print the version.

Run 'pier <command> -h' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "run":
		err = runCommand(ctx, args[1:], stderr)
	case "controller":
		err = controllerCommand(ctx, args[1:], stderr)
	case "agent":
		err = agentCommand(ctx, args[1:], stderr)
	case "echo":
		err = echoCommand(ctx, args[1:], stderr)
	case "get":
		err = getCommand(ctx, args[1:], stdout, stderr)
	case "lint":
		err = lintCommand(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "pier", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "pier: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, errUnsupported):
		return 1 // the report says what
	}
	fmt.Fprintln(stderr, "pier:", err)
	return 1
}

// errUsage means the flags were wrong and the flag set already said why.
var errUsage = errors.New("usage")

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	return nil
}

// logFlags are the logging flags every long-running command takes.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
}

func (l *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(l.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}
