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

// getKinds are the resources `pier get` lists, by every name it takes.
var getKinds = map[string]string{
	"loadbalancers": "loadbalancers", "loadbalancer": "loadbalancers", "lb": "loadbalancers",
	"gateways": "gateways", "gateway": "gateways", "gtw": "gateways",
	"httproutes": "httproutes", "httproute": "httproutes",
	"routes": "routes", "route": "routes",
	"errors": "errors", "error": "errors",
}

func getCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("pier get", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("api-addr", "127.0.0.1:8082", "address of a running pier's API")
	output := fs.String("o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "Usage: pier get loadbalancers|gateways|httproutes|routes|errors [-o json] [--api-addr ADDR]\n\n"+
			"routes lists the routes of every kind (HTTPRoute, GRPCRoute, TLSRoute, TCPRoute, UDPRoute) with their parents' Accepted.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if len(args) == 0 || getKinds[args[0]] == "" {
		fs.Usage()
		return errUsage
	}
	kind := getKinds[args[0]]
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *output != "table" && *output != "json" {
		return fmt.Errorf("-o %q: want table or json", *output)
	}
	items, table, err := fetchKind(ctx, kind, *addr)
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"items": items})
	}
	return table(stdout, time.Now())
}

// fetchKind lists one kind from the API: the items for -o json and the
// printer of its table.
func fetchKind(ctx context.Context, kind, addr string) (any, func(io.Writer, time.Time) error, error) {
	switch kind {
	case "gateways":
		gws, err := api.ListGateways(ctx, addr)
		return gws, func(w io.Writer, now time.Time) error { return api.PrintGateways(w, gws, now) }, err
	case "httproutes":
		routes, err := api.ListHTTPRoutes(ctx, addr)
		return routes, func(w io.Writer, now time.Time) error { return api.PrintHTTPRoutes(w, routes, now) }, err
	case "routes":
		routes, err := api.ListRoutes(ctx, addr)
		return routes, func(w io.Writer, now time.Time) error { return api.PrintRoutes(w, routes, now) }, err
	}
	lbs, err := api.ListLoadBalancers(ctx, addr)
	if kind == "errors" {
		rows := api.RecentErrors(lbs)
		return rows, func(w io.Writer, now time.Time) error { return api.PrintErrors(w, rows, now) }, err
	}
	return lbs, func(w io.Writer, now time.Time) error { return api.PrintTable(w, lbs, now) }, err
}
