package haproxydriver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
	"pier.dev/pier/test/netns"
	"pier.dev/pier/test/topo"
)

// nsPrefix names this package's test namespaces: prefix, test binary's
// pid, test, so netns.RemoveStale finds those of a killed run.
const nsPrefix = "pier-hap-"

// newNetns creates a namespace with lo up, removed when t ends, after
// whatever the test left running in it is killed.
func newNetns(t *testing.T, test string) string {
	t.Helper()
	topo.Skip(t, "curl")
	netns.RemoveStale(nsPrefix)
	name := nsPrefix + strconv.Itoa(os.Getpid()) + "-" + test
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := ip("netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if pids := netns.KillIn(name); len(pids) > 0 {
			t.Errorf("processes left in %s: %v", name, pids)
		}
		if err := ip("netns", "delete", name); err != nil {
			t.Error(err)
		}
	})
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	return name
}

func newDriverIn(t *testing.T, stateDir, ns string) *Driver {
	t.Helper()
	d, err := New(Config{StateDir: stateDir, Secrets: noSecrets{}, Metrics: metrics.New(), Netns: ns,
		Render: render.Options{HardStopAfter: 2 * time.Second, MinSlots: 8},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// servesIn reports whether lb's HAProxy answers inside namespace ns. The
// pool is empty, so its answer is HAProxy's own 503, marked Server: pier.
func servesIn(t *testing.T, ns string, lb *model.LoadBalancer) bool {
	t.Helper()
	url := "http://" + net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port)) + "/"
	out, err := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "-m", "2", "-o", "/dev/null", "-D", "-", url).Output()
	head := strings.ToLower(string(out))
	return err == nil && strings.HasPrefix(head, "http/1.1 503") && strings.Contains(head, "\nserver: pier\r\n")
}

// listensHere reports whether anything accepts lb's address in the
// test's own namespace.
func listensHere(lb *model.LoadBalancer) bool {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port)), time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// checkMaster checks that the tracked pid is HAProxy itself (ip execs),
// that HAProxy wrote the same pid, and that it runs in the namespace.
func checkMaster(t *testing.T, d *Driver, lb *model.LoadBalancer, ns string) int {
	t.Helper()
	inst := d.lbs[lb.UUID]
	pid := inst.sh.proc.PID()
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	if argv0 := strings.Split(string(cmdline), "\x00")[0]; filepath.Base(argv0) != "haproxy" {
		t.Fatalf("tracked pid %d runs %q, not haproxy", pid, argv0)
	}
	written, err := os.ReadFile(filepath.Join(inst.sh.at.Dir, "haproxy.pid"))
	if err != nil || strings.TrimSpace(string(written)) != strconv.Itoa(pid) {
		t.Fatalf("haproxy.pid holds %q (%v), tracked pid %d", written, err, pid)
	}
	var got, want syscall.Stat_t
	if syscall.Stat("/proc/"+strconv.Itoa(pid)+"/ns/net", &got) != nil || syscall.Stat("/run/netns/"+ns, &want) != nil ||
		got.Ino != want.Ino || got.Dev != want.Dev {
		t.Fatalf("master %d is not in namespace %s", pid, ns)
	}
	return pid
}

// TestNetns runs HAProxy in a namespace: it serves there and not here,
// the pid tracked is HAProxy's, a new driver adopts it (one without the
// namespace refuses to), and the supervisor restarts it there.
func TestNetns(t *testing.T) {
	needHAProxy(t)
	ns := newNetns(t, "t1")
	ctx := context.Background()
	dir := harness.ShortTempDir(t)
	lb := lbWith(6, freePort(t))
	lb.VIP = "127.0.0.6"

	first := newDriverIn(t, dir, ns)
	if _, err := first.Apply(ctx, lb); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 5*time.Second, "HAProxy to serve in the namespace", func() bool { return servesIn(t, ns, lb) })
	if listensHere(lb) {
		t.Fatal("the test's namespace listens on the load balancer's address")
	}
	pid := checkMaster(t, first, lb, ns)
	first.Close(false)

	outside := newDriver(t, dir)
	if _, err := outside.Apply(ctx, lb); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Fatalf("a driver without the namespace adopted its master: %v", err)
	}
	outside.Close(false)

	d := newDriverIn(t, dir, ns)
	t.Cleanup(func() { d.Close(true) })
	if err := d.Recover(ctx, map[string]bool{lb.UUID: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(ctx, lb); err != nil {
		t.Fatal(err)
	}
	if !d.lbs[lb.UUID].sh.proc.Adopted() || checkMaster(t, d, lb, ns) != pid || !servesIn(t, ns, lb) {
		t.Fatal("the new driver did not adopt the master serving in the namespace")
	}

	untilUnhealthy(t, d, lb.UUID, func() { killPIDs(t, pid) })
	harness.WaitFor(t, 20*time.Second, "the supervisor's restart", func() bool { return d.Healthy(lb.UUID) })
	if restarted := checkMaster(t, d, lb, ns); restarted == pid {
		t.Fatal("same master pid after the restart")
	}
	if !servesIn(t, ns, lb) || listensHere(lb) {
		t.Fatal("after the supervisor's restart: not serving in the namespace only")
	}
}

func TestNetnsName(t *testing.T) {
	for _, bad := range []string{"x y", "../run", "-n", "UPPER", strings.Repeat("n", 33)} {
		if _, err := New(Config{StateDir: t.TempDir(), Netns: bad}); err == nil {
			t.Errorf("namespace %q accepted", bad)
		}
	}
}
