//go:build linux

package ecmp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"time"

	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/model"
)

// nodeConfig is what a node process is told (PIER_ECMP_NODE).
type nodeConfig struct {
	Name, Self, Router string
	StateDir           string
	LB                 model.LoadBalancer
	// Log is a file the node logs to at Info, what an agent logs by
	// default (stderr gets warnings only).
	Log string
	BFD bool // BFD with the router at the defaults
}

// nodeEnv names the variable that makes the test binary a node.
const nodeEnv = "PIER_ECMP_NODE"

// runNode is one node: the agent's native driver (nftables in the
// kernel of the node's namespace) and its BGP mover in ECMP mode, ticked
// as the agent ticks it. The BGP session's socket belongs to the
// namespace of the process, hence a process per node. Each line on stdin
// is a command, answered with "ok": "drain" and "stop" (the agent's exit
// with --on-exit=stop: routes withdrawn, table deleted).
func runNode() int {
	var cfg nodeConfig
	if err := json.Unmarshal([]byte(os.Getenv(nodeEnv)), &cfg); err != nil {
		fmt.Println(err)
		return 2
	}
	var handler slog.Handler = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})
	if cfg.Log != "" {
		f, err := os.OpenFile(cfg.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			fmt.Println(err)
			return 2
		}
		defer f.Close()
		handler = slog.NewMultiHandler(handler, slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	logger := slog.New(handler)
	ctx := context.Background()
	drv, err := nativedriver.New(nativedriver.Config{StateDir: cfg.StateDir, Logger: logger})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	lb := &cfg.LB
	if _, err := drv.Apply(ctx, lb); err != nil {
		fmt.Println(err)
		return 2
	}
	self := netip.MustParseAddr(cfg.Self)
	mv := bgp.NewMover(bgp.MoverConfig{Node: cfg.Name, ECMP: true, Logger: logger, Speaker: bgp.Config{
		ASN: 65000, RouterID: self, HoldTime: 3 * time.Second, BFD: bgp.BFD{Enabled: cfg.BFD},
		Peers: []bgp.Peer{{Address: netip.MustParseAddr(cfg.Router), ASN: 65000}}}})
	if err := mv.Start(ctx, node{drv}); err != nil {
		fmt.Println(err)
		return 2
	}
	mv.Sync(ctx, []*model.LoadBalancer{lb})
	cmds := make(chan string)
	go func() {
		in := bufio.NewScanner(os.Stdin)
		for in.Scan() {
			cmds <- in.Text()
		}
		close(cmds)
	}()
	fmt.Println("ok")
	tick := time.NewTicker(mover.TickEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			mv.Tick(ctx)
		case cmd, ok := <-cmds:
			switch {
			case !ok || cmd == "stop":
				mv.Close(ctx, true)
				drv.Close(true)
				fmt.Println("ok")
				return 0
			case cmd == "drain":
				mv.Drain(ctx, true)
				mv.Tick(ctx)
				fmt.Println("ok")
			default:
				fmt.Println("unknown command", cmd)
			}
		}
	}
}

// node is the agent's core as the mover sees it: the load balancer
// serves here while its table is applied.
type node struct{ drv *nativedriver.Driver }

func (n node) Healthy(uuid string) bool        { return n.drv.Healthy(uuid) }
func (n node) Served(uuid string) bool         { return n.drv.Healthy(uuid) }
func (n node) Reconnect(context.Context, bool) {}
func (n node) Wake()                           {}
