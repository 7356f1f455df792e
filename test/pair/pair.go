//go:build linux

// Package pair runs the active/standby pair of `pier run --nodes 2` with a
// backend on the lab's pods host and traffic from its client host, and
// measures failovers. The tests of this folder and hack/demo-ha use it.
package pair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/test/harness"
)

// Options configures Start.
type Options struct {
	Bin       string // the pier binary
	Dir       string // state and manifests; created
	Prefix    string // lab namespace prefix
	Manifests string // folder of manifests to copy (examples/ha)
	HTTPPort  int
	APIAddr   string
	Host      string // Host header of the Ingress under test
	Ingress   string // namespace/name whose address is probed
	Log       func(format string, args ...any)
	// Args are more flags for pier run (a measurement's settings).
	Args []string
}

// Env is a running pair.
type Env struct {
	opts  Options
	Lab   *lab.Lab
	VIP   netip.Addr
	pier  *exec.Cmd
	done  chan struct{}
	echo  []*exec.Cmd
	nodes string // the Node manifest file Drain writes
}

// Start starts `pier run --nodes 2` on the manifests, the echo backend
// in the pods host, and waits until the Ingress's VIP serves from the
// client host.
func Start(ctx context.Context, opts Options) (*Env, error) {
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	manifests := filepath.Join(opts.Dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(opts.Manifests)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(opts.Manifests, e.Name()))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(manifests, e.Name()), b, 0o644); err != nil {
			return nil, err
		}
	}
	env := &Env{opts: opts, done: make(chan struct{}), nodes: filepath.Join(manifests, "zz-nodes.yaml")}
	logf, err := os.Create(filepath.Join(opts.Dir, "pier.log"))
	if err != nil {
		return nil, err
	}
	env.pier = exec.Command(opts.Bin, "run", "--nodes", "2", "--lab-prefix", opts.Prefix, "-f", manifests,
		"--state-dir", filepath.Join(opts.Dir, "s"), "--http-port", strconv.Itoa(opts.HTTPPort),
		"--https-port", strconv.Itoa(opts.HTTPPort+1), "--api-addr", opts.APIAddr, "--log-level", "info")
	env.pier.Args = append(env.pier.Args, opts.Args...)
	env.pier.Stdout, env.pier.Stderr = logf, logf
	if err := env.pier.Start(); err != nil {
		logf.Close()
		return nil, err
	}
	go func() { _ = env.pier.Wait(); logf.Close(); close(env.done) }()
	env.Lab, err = lab.Attach(lab.Options{Prefix: opts.Prefix, Nodes: 2, Client: true, Pods: true})
	if err != nil {
		_ = env.pier.Process.Kill()
		return nil, err
	}
	fail := func(err error) (*Env, error) {
		env.Stop()
		return nil, fmt.Errorf("%w; pier run's log ends:\n%s", err, env.Log())
	}
	if err := env.waitFor(ctx, "the lab network", 20*time.Second, func() bool {
		_, err := os.Stat("/run/netns/" + env.Lab.Pods.NS)
		return err == nil
	}); err != nil {
		return fail(err)
	}
	// Two backends on the pods host: examples/ha points at the first;
	// the tests add and remove the second.
	for i, port := range []string{"9001", "9002"} {
		echo := env.Lab.Pods.Command(context.WithoutCancel(ctx), opts.Bin, "echo", "--listen", env.Lab.Pods.Addr.String()+":"+port,
			"--namespace", "demo", "--service", "echo", "--pod", fmt.Sprintf("echo-%d", i+1), "--log-level", "warn")
		if err := echo.Start(); err != nil {
			return fail(err)
		}
		env.echo = append(env.echo, echo)
	}
	if err := env.waitFor(ctx, "an address in the Ingress status", 30*time.Second, func() bool {
		env.VIP = env.ingressAddress()
		return env.VIP.IsValid()
	}); err != nil {
		return fail(err)
	}
	var lastErr error
	if err := env.waitFor(ctx, "the VIP to serve from the client host", 30*time.Second, func() bool {
		lastErr = env.getOnce(netip.AddrPortFrom(env.VIP, uint16(opts.HTTPPort)), opts.Host)
		return lastErr == nil
	}); err != nil {
		return fail(fmt.Errorf("%w (the last request: %v; holders of %s: %v)", err, lastErr, env.VIP, env.Holders()))
	}
	return env, nil
}

// getOnce sends one GET to addr from the client host, with Host host,
// and says why it did not answer 200. It is for readiness waits, not
// measurements: each request is given a second, since on a loaded
// machine (CI runs suites side by side) the first one after an address
// moved can take longer than a probe's 300 ms.
func (e *Env) getOnce(addr netip.AddrPort, host string) error {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		DialContext: harness.NetnsDial(e.Lab.Client.NS, time.Second), DisableKeepAlives: true}}
	code, _, _, err := harness.Get(client, addr.Addr().String(), int(addr.Port()), host, "/")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	return err
}

func (e *Env) waitFor(ctx context.Context, what string, limit time.Duration, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case <-e.done:
			return fmt.Errorf("pier run exited while waiting for %s", what)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %s", what, limit)
		}
	}
	return nil
}

// ingressAddress reads the first address of the Ingress status.
func (e *Env) ingressAddress() netip.Addr {
	resp, err := http.Get("http://" + e.opts.APIAddr + "/ingresses/" + e.opts.Ingress)
	if err != nil {
		return netip.Addr{}
	}
	defer resp.Body.Close()
	var body struct {
		Status struct {
			LoadBalancer struct {
				Ingress []struct {
					IP string `json:"ip"`
				} `json:"ingress"`
			} `json:"loadBalancer"`
		} `json:"status"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || len(body.Status.LoadBalancer.Ingress) == 0 {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(body.Status.LoadBalancer.Ingress[0].IP)
	return a
}

// Probe starts steady traffic to the VIP from the client host. Each
// request may take timeout: short (300 ms) where a failover's recovery is
// measured, longer where only failures count and a loaded machine may
// stall a request for a moment (a lost SYN still shows: it costs 1 s).
func (e *Env) Probe(ctx context.Context, timeout time.Duration) *harness.Probe {
	return harness.StartProbe(ctx, harness.ProbeOptions{
		URL: "http://" + netip.AddrPortFrom(e.VIP, uint16(e.opts.HTTPPort)).String() + "/", Host: e.opts.Host,
		Netns: e.Lab.Client.NS, Timeout: timeout,
	})
}

// Probe timeouts: see Probe.
const (
	RecoveryTimeout = 300 * time.Millisecond
	FailureTimeout  = 900 * time.Millisecond
)

// Holders names the nodes that hold the VIP now.
func (e *Env) Holders() []string { return e.Lab.Holders(e.VIP) }

// WaitHolder waits until exactly node holds the VIP and returns when.
func (e *Env) WaitHolder(ctx context.Context, node string, limit time.Duration) (time.Time, error) {
	var at time.Time
	err := e.waitFor(ctx, node+" alone holding "+e.VIP.String(), limit, func() bool {
		h := e.Holders()
		at = time.Now()
		return len(h) == 1 && h[0] == node
	})
	return at, err
}

// Node returns the lab host of a node name ("n0").
func (e *Env) Node(name string) *lab.Host {
	for _, h := range e.Lab.Nodes {
		if h.Name == name {
			return h
		}
	}
	return nil
}

// KillHAProxy kills every HAProxy process of a node with SIGKILL and
// returns when it sent the signals: the fault time.
func (e *Env) KillHAProxy(node string) (time.Time, int, error) {
	pids := lab.PidsIn(e.Node(node).NS, "haproxy")
	if len(pids) == 0 {
		return time.Time{}, 0, errors.New("no haproxy runs on " + node)
	}
	at := time.Now()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return at, len(pids), nil
}

// Drain writes the Node manifest that cordons node (on) or not: pier run
// reads it like any manifest. It returns when the file was written.
func (e *Env) Drain(node string, on bool) (time.Time, error) {
	doc := fmt.Sprintf("apiVersion: v1\nkind: Node\nmetadata:\n  name: %s\nspec:\n  unschedulable: %t\n", node, on)
	tmp := e.nodes + ".tmp"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		return time.Time{}, err
	}
	at := time.Now()
	return at, os.Rename(tmp, e.nodes)
}

// DrainStarted returns when node's agent started its drain at or after
// after, read from pier run's log: the handover is measured from there
// (the manifest watcher's debounce comes before it).
func (e *Env) DrainStarted(node string, after time.Time) (time.Time, bool) {
	b, err := os.ReadFile(filepath.Join(e.opts.Dir, "pier.log"))
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, `msg="drain: asking clients to reconnect`) || !strings.Contains(line, " node="+node+" ") {
			continue
		}
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		t, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && !t.Before(after.Truncate(time.Millisecond)) {
			return t, true
		}
	}
	return time.Time{}, false
}

// Stop ends pier run (which removes the lab) and the backend.
func (e *Env) Stop() {
	for _, echo := range e.echo {
		_ = echo.Process.Kill()
		_ = echo.Wait()
	}
	if e.pier.Process != nil {
		_ = e.pier.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.done:
		case <-time.After(15 * time.Second):
			_ = e.pier.Process.Kill()
			<-e.done
		}
	}
	// pier run removes its lab on exit; a crash would leave it.
	e.Lab.Remove()
}

// Log returns the tail of pier run's log, then of each node's keepalived
// log: a failed move is explained by what keepalived itself saw.
func (e *Env) Log() string {
	var out strings.Builder
	out.WriteString(tail(filepath.Join(e.opts.Dir, "pier.log"), 6000))
	kl, _ := filepath.Glob(filepath.Join(e.opts.Dir, "s", "*", "vrrp", "keepalived.log"))
	for _, p := range kl {
		fmt.Fprintf(&out, "\n--- %s (tail):\n%s", p, tail(p, 2500))
	}
	return out.String()
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
