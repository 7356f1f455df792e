package haproxydriver

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestContractShards runs the driver contract with load balancers packed
// into two HAProxy processes.
func TestContractShards(t *testing.T) {
	needHAProxy(t)
	runContract(t, func(t *testing.T, dir string) driver.Driver { return newSharded(t, dir, 2) })
}

// shardLB is load balancer n on an address of its own, 127.0.0.(20+n),
// with a backend serving its name.
func shardLB(t *testing.T, n int) *model.LoadBalancer {
	lb := lbWith(n, freePort(t), memberAt(echo(t, "127.0.0.1:0", "lb"+strconv.Itoa(n))))
	lb.VIP = "127.0.0." + strconv.Itoa(20+n)
	return lb
}

// lbsIn returns n load balancers that the driver maps to shard k of
// shards, numbered from first.
func lbsIn(t *testing.T, k, shards, first, n int) []*model.LoadBalancer {
	var out []*model.LoadBalancer
	for i := first; len(out) < n; i++ {
		if i > 99 {
			t.Fatal("not enough load balancers in shard", k)
		}
		uuid := lbWith(i, 0).UUID
		if shardIndex(uuid, shards) == k {
			out = append(out, shardLB(t, i))
		}
	}
	return out
}

func applyAll(t *testing.T, d *Driver, lbs ...*model.LoadBalancer) []string {
	t.Helper()
	var hashes []string
	for _, lb := range lbs {
		a, err := d.Apply(context.Background(), lb)
		if err != nil {
			t.Fatalf("apply %s: %v", lb.Name, err)
		}
		hashes = append(hashes, a.ConfigHash)
	}
	return hashes
}

func serveAll(t *testing.T, lbs ...*model.LoadBalancer) {
	t.Helper()
	for _, lb := range lbs {
		want := "lb" + lb.Name[len("ns/lb-"):]
		if got := get(lb); got != want {
			t.Errorf("%s on %s: got %q, want %q", lb.Name, lb.VIP, got, want)
		}
	}
}

// masters lists the distinct HAProxy master pids running the load
// balancers.
func masters(d *Driver) []int {
	var pids []int
	for _, inst := range d.lbs {
		if pid := inst.sh.proc.PID(); pid != 0 && !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// TestShardsPackLoadBalancers runs six load balancers in two shards: two
// HAProxy masters, each load balancer serving on its own address. A
// seventh reloads only its shard; the other's master, workers and
// reload counter stay as they were.
func TestShardsPackLoadBalancers(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 2)
	t.Cleanup(func() { d.Close(true) })
	if err := d.Recover(context.Background(), map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	zero, one := lbsIn(t, 0, 2, 1, 4), lbsIn(t, 1, 2, 1, 3)
	all := append(slices.Clone(zero[:3]), one...)
	applyAll(t, d, all...)
	serveAll(t, all...)
	if m := masters(d); len(m) != 2 {
		t.Fatalf("%d load balancers run in masters %v, want 2", len(all), m)
	}

	other := d.lbs[one[0].UUID].sh
	mine := d.lbs[zero[0].UUID].sh
	otherWorkers, otherStats, otherPID := workerPIDs(t, d, one[0].UUID), other.proc.Stats(), other.proc.PID()
	mineStats := mine.proc.Stats()
	applyAll(t, d, zero[3])
	serveAll(t, append(all, zero[3])...)
	if got := workerPIDs(t, d, one[0].UUID); !slices.Equal(got, otherWorkers) || other.proc.PID() != otherPID || other.proc.Stats() != otherStats {
		t.Errorf("the other shard changed: workers %v -> %v, stats %+v -> %+v", otherWorkers, got, otherStats, other.proc.Stats())
	}
	if got := mine.proc.Stats().ReloadsOK; got != mineStats.ReloadsOK+1 {
		t.Errorf("its shard reloaded %d times, want 1", got-mineStats.ReloadsOK)
	}

	// Removing one reloads its shard without it; the others keep serving.
	d.Remove(zero[1].UUID)
	if get(zero[1]) != "" {
		t.Errorf("%s still serves after Remove", zero[1].Name)
	}
	serveAll(t, zero[0], zero[2], zero[3])
	serveAll(t, one...)
}

// TestShardsRejectOneFragment breaks one load balancer of a shard: its
// apply is rejected, it keeps serving its last good spec, the shard's
// others keep serving, and the shard still takes a new load balancer.
func TestShardsRejectOneFragment(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	d := newSharded(t, state, 2)
	d.cfg.Binary = refusingHAProxy(t, state)
	t.Cleanup(func() { d.Close(true) })
	lbs := lbsIn(t, 0, 2, 1, 3)
	applyAll(t, d, lbs[:2]...)

	// A member change alone is not checked again (render.MembersOnly):
	// the pool's health check changes with it.
	bad := lbs[0].Clone()
	bad.Pools[0].Members[0].Address = refusedAddress
	bad.Pools[0].HealthCheck = !bad.Pools[0].HealthCheck
	if _, err := d.Apply(context.Background(), bad); !errors.Is(err, driver.ErrRejected) {
		t.Fatalf("broken fragment: got %v, want ErrRejected", err)
	}
	serveAll(t, lbs[:2]...)
	// A new load balancer whose fragment HAProxy refuses never joins.
	badNew := lbs[2].Clone()
	badNew.Pools[0].Members[0].Address = refusedAddress
	if _, err := d.Apply(context.Background(), badNew); !errors.Is(err, driver.ErrRejected) {
		t.Fatalf("broken new fragment: got %v, want ErrRejected", err)
	}
	if d.Healthy(badNew.UUID) {
		t.Error("a rejected new load balancer reads healthy")
	}
	applyAll(t, d, lbs[2])
	serveAll(t, lbs...)
	if m := masters(d); len(m) != 1 {
		t.Errorf("masters %v, want 1", m)
	}
}

// refusedAddress is a member address refusingHAProxy's check refuses.
const refusedAddress = "127.0.0.99"

// refusingHAProxy returns a wrapper around haproxy whose `-c` fails when
// a file it checks names refusedAddress: HAProxy refusing one load
// balancer's fragment, whatever the reason (render accepts it).
func refusingHAProxy(t *testing.T, state string) string {
	real, _ := exec.LookPath("haproxy")
	wrapper := filepath.Join(state, "haproxy-wrapper")
	script := "#!/bin/sh\ncase \" $* \" in *\" -c \"*) for a in \"$@\"; do [ -e \"$a\" ] && grep -rqsF " + refusedAddress + " -- \"$a\" && exit 1; done;; esac\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return wrapper
}

// TestShardsRestartAdopts restarts the agent: the new driver adopts both
// shards with every load balancer in them, reloads nothing, and serves.
func TestShardsRestartAdopts(t *testing.T) {
	needHAProxy(t)
	dir := harness.ShortTempDir(t)
	d := newSharded(t, dir, 2)
	lbs := append(lbsIn(t, 0, 2, 1, 3), lbsIn(t, 1, 2, 1, 2)...)
	hashes := applyAll(t, d, lbs...)
	before := masters(d)
	d.Close(false)

	d2 := newSharded(t, dir, 2)
	t.Cleanup(func() { d2.Close(true) })
	placed := map[string]bool{}
	for _, lb := range lbs[1:] {
		placed[lb.UUID] = true
	}
	if err := d2.Recover(context.Background(), placed); err != nil {
		t.Fatal(err)
	}
	// lbs[0] is gone: the first apply of its shard reloads without it.
	if got := applyAll(t, d2, lbs[1:]...); !slices.Equal(got, hashes[1:]) {
		t.Errorf("hashes after adoption %v, want %v", got, hashes[1:])
	}
	if got := masters(d2); !slices.Equal(got, before) {
		t.Errorf("masters after adoption %v, want %v", got, before)
	}
	serveAll(t, lbs[1:]...)
	if get(lbs[0]) != "" {
		t.Error("the load balancer gone while no agent ran still serves")
	}
	for _, lb := range lbs[3:] { // the shard without a gone load balancer
		if s := d2.lbs[lb.UUID].sh.proc.Stats(); s.ReloadsOK != 0 {
			t.Errorf("%s: adopted shard reloaded %d times, want 0", lb.Name, s.ReloadsOK)
		}
	}
	if stopped := d2.Close(true); len(stopped) != len(lbs)-1 {
		t.Errorf("Close stopped %v", stopped)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range before {
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("master %d still runs after Close(true)", pid)
		}
	}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestShardsRestartedOnce kills a shard's master: the supervisor restarts
// it, Drifted lists each of its load balancers, and applying the first
// one reloads the shard for them all.
func TestShardsRestartedOnce(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 2)
	t.Cleanup(func() { d.Close(true) })
	lbs := lbsIn(t, 0, 2, 1, 3)
	applyAll(t, d, lbs...)
	sh := d.lbs[lbs[0].UUID].sh
	killPIDs(t, sh.proc.PID())
	deadline := time.Now().Add(15 * time.Second)
	for sh.proc.Stats().Restarts == 0 || !sh.proc.Running() {
		if time.Now().After(deadline) {
			t.Fatal("the supervisor did not restart the shard")
		}
		time.Sleep(20 * time.Millisecond)
	}
	drifted := d.Drifted()
	slices.Sort(drifted)
	want := []string{lbs[0].UUID, lbs[1].UUID, lbs[2].UUID}
	slices.Sort(want)
	if !slices.Equal(drifted, want) {
		t.Fatalf("drifted %v, want %v", drifted, want)
	}
	reloads := sh.proc.Stats().ReloadsOK
	applyAll(t, d, lbs[0])
	if got := d.Drifted(); len(got) != 0 {
		t.Errorf("still drifted after one apply: %v", got)
	}
	if got := sh.proc.Stats().ReloadsOK - reloads; got != 1 {
		t.Errorf("%d reloads, want 1", got)
	}
	waitUntil(t, func() bool { return get(lbs[2]) == "lb"+lbs[2].Name[len("ns/lb-"):] })
	serveAll(t, lbs...)
}

// waitUntil polls ok for up to 10 s: a restarted master takes a moment
// to bind.
func waitUntil(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestShardsSwitchMode restarts the agent from one process per load
// balancer to two shards and back: each time the new processes serve
// every load balancer and the previous ones are stopped.
func TestShardsSwitchMode(t *testing.T) {
	needHAProxy(t)
	dir := harness.ShortTempDir(t)
	lbs := append(lbsIn(t, 0, 2, 1, 2), lbsIn(t, 1, 2, 1, 1)...)
	placed := map[string]bool{}
	for _, lb := range lbs {
		placed[lb.UUID] = true
	}
	var before []int
	for _, processes := range []int{0, 2, 0} {
		d := newSharded(t, dir, processes)
		if err := d.Recover(context.Background(), placed); err != nil {
			t.Fatal(err)
		}
		applyAll(t, d, lbs...)
		serveAll(t, lbs...)
		want := len(lbs)
		if processes > 0 {
			want = processes
		}
		if m := masters(d); len(m) != want {
			t.Errorf("--haproxy-processes %d: masters %v, want %d", processes, m, want)
		}
		d.waitStopped(slices.Collect(maps.Keys(d.stopping))...)
		for _, pid := range before {
			if alive(pid) && !slices.Contains(masters(d), pid) {
				t.Errorf("--haproxy-processes %d: previous master %d still runs", processes, pid)
			}
		}
		before = masters(d)
		d.Close(false)
	}
	d := newSharded(t, dir, 0)
	if err := d.Recover(context.Background(), placed); err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lbs...)
	d.Close(true)
}
