package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"

	"pier.dev/pier/internal/api"
)

func getCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("api-addr", "127.0.0.1:8082", "address of a running pier's API")
	output := fs.String("o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: pier get loadbalancers [-o json] [--api-addr ADDR]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if len(args) == 0 || (args[0] != "loadbalancers" && args[0] != "lb" && args[0] != "loadbalancer") {
		fs.Usage()
		return errUsage
	}
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	lbs, err := api.ListLoadBalancers(ctx, *addr)
	if err != nil {
		return err
	}
	switch *output {
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"items": lbs})
	case "table":
		return api.PrintTable(stdout, lbs, time.Now())
	}
	return fmt.Errorf("-o %q: want table or json", *output)
}
