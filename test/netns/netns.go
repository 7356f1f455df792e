//go:build linux

// Package netns runs a whole test binary inside a network namespace of its
// own, so tests can bind and reach "cluster" addresses (pod IPs, VIPs) that
// Kubernetes accepts, without any route off the machine. The namespace has
// only its loopback interface: addresses added to lo are local, everything
// else is unreachable, so a test cannot send traffic anywhere by mistake.
//
// Use it as the first line of TestMain:
//
//	func TestMain(m *testing.M) {
//		netns.Main(m, netns.Options{Prefixes: []netip.Prefix{netns.PodPrefix, netns.VIPPrefix}})
//	}
//
// or, to combine with another TestMain helper:
//
//	netns.Enter(opts) // returns only inside the namespace
//	kubeapi.Main(m, kubeapi.Options{})
//
// Outside, the binary creates the namespace (needs root and iproute2),
// re-executes itself there with the same arguments, passes the exit status
// through and deletes the namespace. Every process the tests start inherits
// the namespace.
package netns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
)

// EnvName names the environment variable that carries the namespace's name
// to the re-executed binary and to everything it starts.
const EnvName = "PIER_NETNS"

// namePrefix starts every namespace this package creates; the pid after it
// lets a later run find namespaces whose owner died (removeStale).
const namePrefix = "pier-test-"

// runDir is where iproute2 keeps named namespaces.
const runDir = "/run/netns"

// killGrace is how long a signalled test binary gets to stop its own
// children (kubeapi stops etcd and kube-apiserver in up to ~35 s) before
// everything left in the namespace is killed.
const killGrace = 40 * time.Second

// The conventional test prefixes. The first address of each is the one put
// on lo; with a prefix on lo every address in it is local and bindable.
var (
	PodPrefix = netip.MustParsePrefix("10.244.0.1/16")
	VIPPrefix = netip.MustParsePrefix("10.250.0.1/16")
)

// Options configures the namespace.
type Options struct {
	// Prefixes are added to lo as address/length (e.g. 10.244.0.1/16). Only
	// IPv4: an IPv6 prefix on lo does not make its other addresses local.
	Prefixes []netip.Prefix
	// Prepare, if set, runs outside the namespace before it is created, for
	// what needs the network (builds, downloads). Environment variables it
	// sets reach the tests. A Prepare error fails the run.
	Prepare func() error
}

// Main runs m inside a fresh namespace and exits with its status.
func Main(m *testing.M, opts Options) {
	Enter(opts)
	os.Exit(m.Run())
}

// Enter returns at once inside the namespace. Outside, it creates one,
// re-executes the binary in it and exits with the child's status: it never
// returns there.
func Enter(opts Options) {
	if Inside() {
		return
	}
	os.Exit(runOutside(opts))
}

var inside = sync.OnceValue(func() bool {
	name := os.Getenv(EnvName)
	if name == "" || strings.ContainsRune(name, '/') {
		return false
	}
	// The marker alone could be inherited by a process started outside;
	// only the namespace itself is proof.
	return sameFile(filepath.Join(runDir, name), "/proc/self/ns/net")
})

// Inside reports whether this process runs in a namespace made by Enter.
func Inside() bool { return inside() }

// Name is the namespace's name inside it ("" outside): for messages such as
// "ip netns exec <name> kubectl ...".
func Name() string {
	if !Inside() {
		return ""
	}
	return os.Getenv(EnvName)
}

func runOutside(opts Options) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "netns: %v\n", err)
		return 1
	}
	if err := checkPrefixes(opts.Prefixes); err != nil {
		return fail(err)
	}
	if opts.Prepare != nil {
		if err := opts.Prepare(); err != nil {
			return fail(fmt.Errorf("prepare: %w", err))
		}
	}
	removeStale()
	name, err := create(opts.Prefixes)
	if err != nil {
		return fail(err)
	}
	defer remove(name)
	code, err := runChild(name)
	if err != nil {
		return fail(err)
	}
	return code
}

func checkPrefixes(prefixes []netip.Prefix) error {
	for _, p := range prefixes {
		if !p.IsValid() || !p.Addr().Is4() {
			return fmt.Errorf("prefix %s: want an IPv4 address/length", p)
		}
	}
	return nil
}

// create adds the namespace and sets up lo. On error nothing is left.
func create(prefixes []netip.Prefix) (string, error) {
	var suffix [3]byte
	_, _ = rand.Read(suffix[:])
	name := namePrefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(suffix[:])
	if err := ip("netns", "add", name); err != nil {
		return "", err
	}
	cmds := [][]string{{"-n", name, "link", "set", "lo", "up"}}
	for _, p := range prefixes {
		cmds = append(cmds, []string{"-n", name, "addr", "add", p.String(), "dev", "lo"})
	}
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			remove(name)
			return "", err
		}
	}
	return name, nil
}

// runChild runs the binary in the namespace until it exits, forwarding
// termination signals to it, and returns its exit status.
func runChild(name string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	// Pdeathsig fires when the forking thread ends, not the process: keep
	// this goroutine on its thread until the child is gone.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	cmd := exec.Command("ip", append([]string{"netns", "exec", name, exe}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), EnvName+"="+name)
	// Own group: a terminal's ^C reaches us, and we decide what the child
	// gets. Pdeathsig: if we are killed, so is the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %s in %s: %w", exe, name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	forward(cmd.Process.Pid, sigs, done)
	killLeftovers(name)
	return exitCode(cmd.ProcessState), nil
}

// forward passes signals to the child's process group until done. After
// the first signal the child has killGrace to exit, then its group is
// killed; SIGQUIT (go test's timeout) is passed on so the child dumps its
// goroutines.
func forward(pgid int, sigs <-chan os.Signal, done <-chan struct{}) {
	var deadline <-chan time.Time
	for {
		select {
		case <-done:
			return
		case sig := <-sigs:
			_ = syscall.Kill(-pgid, sig.(syscall.Signal))
			if deadline == nil {
				deadline = time.After(killGrace)
			}
		case <-deadline:
			fmt.Fprintf(os.Stderr, "netns: test binary still running %s after a signal; killing it\n", killGrace)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			deadline = nil
		}
	}
}

func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// killLeftovers kills what the tests started and left running in the
// namespace (they can only be ours: nothing else knows the namespace). A
// leak is a test bug, so it is reported.
func killLeftovers(name string) {
	if pids := KillIn(name); len(pids) > 0 {
		fmt.Fprintf(os.Stderr, "netns: killed processes left in %s: %v\n", name, pids)
	}
}

// KillIn kills every process in the named namespace with SIGKILL, waits
// up to a second for them to go, and returns their pids. The code lives in
// internal/lab, which pier run --nodes shares with the tests.
func KillIn(name string) []int { return lab.KillIn(name) }

func remove(name string) {
	if err := ip("netns", "delete", name); err != nil {
		fmt.Fprintf(os.Stderr, "netns: %v\n", err)
	}
}

// removeStale deletes namespaces of earlier runs whose binary died without
// cleaning up (SIGKILL, go test's hard timeout): their name holds the pid.
func removeStale() { RemoveStale(namePrefix) }

// RemoveStale deletes every namespace named prefix+"<pid>-…" whose pid is
// no longer running, after killing what still runs inside it.
func RemoveStale(prefix string) { lab.RemoveStale(prefix) }

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		var execErr *exec.Error
		if errors.As(err, &execErr) {
			return fmt.Errorf("ip %s: %w (needs iproute2)", strings.Join(args, " "), err)
		}
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func sameFile(a, b string) bool {
	var sa, sb syscall.Stat_t
	if syscall.Stat(a, &sa) != nil || syscall.Stat(b, &sb) != nil {
		return false
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}
