//go:build linux

// Package ecmplab holds the parts of the native provider's ECMP namespace
// lab that more than one suite uses: a node as a process (the agent's
// native driver and its BGP mover in ECMP mode) and the router's bird
// configuration. test/ecmp builds its world of them, bench/ecmp_test.go
// its own, each with its own namespace names.
package ecmplab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"pier.dev/pier/internal/agent/bgp"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/agent/nativedriver"
	"pier.dev/pier/internal/model"
)

// NodeConfig is what a node process is told (NodeEnv).
type NodeConfig struct {
	Name, Self, Router string
	StateDir           string
	LB                 model.LoadBalancer
	// Log is a file the node logs to at Info, what an agent logs by
	// default (stderr gets warnings only).
	Log string
	BFD bool // BFD with the router at the defaults
}

// NodeEnv names the variable that makes a test binary a node: its
// TestMain calls NodeMain when it is set.
const NodeEnv = "PIER_ECMP_NODE"

// NodeMain is one node: the agent's native driver (nftables in the
// kernel of the node's namespace) and its BGP mover in ECMP mode, ticked
// as the agent ticks it. The BGP session's socket belongs to the
// namespace of the process, hence a process per node. Each line on stdin
// is a command, answered with "ok": "drain" (routes withdrawn, the
// table kept), "undrain" (advertised again) and "stop" (the agent's exit
// with --on-exit=stop: routes withdrawn, table deleted).
func NodeMain() int {
	var cfg NodeConfig
	if err := json.Unmarshal([]byte(os.Getenv(NodeEnv)), &cfg); err != nil {
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
			case cmd == "drain" || cmd == "undrain":
				mv.Drain(ctx, cmd == "drain")
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

// Node is a running node process.
type Node struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// StartNode runs this executable, a test binary whose TestMain calls
// NodeMain when NodeEnv is set, as node cfg in namespace ns, and returns
// once the node has applied its table and started its speaker. The
// caller ends it with Kill.
func StartNode(ns string, cfg NodeConfig) (*Node, error) {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, err
	}
	env, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), NodeEnv+"="+string(env))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("node %s: %w", cfg.Name, err)
	}
	n := &Node{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if !n.out.Scan() || n.out.Text() != "ok" {
		n.Kill()
		return nil, fmt.Errorf("node %s: %q", cfg.Name, n.out.Text())
	}
	return n, nil
}

// Do sends the node a command (NodeMain) and waits for its "ok".
func (n *Node) Do(cmd string) error {
	if _, err := fmt.Fprintln(n.in, cmd); err != nil {
		return fmt.Errorf("node %s: %w", cmd, err)
	}
	if !n.out.Scan() || n.out.Text() != "ok" {
		return fmt.Errorf("node %s: %q", cmd, n.out.Text())
	}
	return nil
}

// Kill ends the node at once, as a crash would: its table and routes stay
// in its namespace until the namespace goes.
func (n *Node) Kill() {
	_ = n.cmd.Process.Kill()
	_ = n.cmd.Wait()
}
