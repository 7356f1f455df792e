package haproxydriver

import (
	"bytes"
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// server is one slot as HAProxy reports it.
type server struct {
	addr       string // address:port
	lastChange int    // seconds since the last state change
	sessions   int    // stot
}

// servers reads `show servers state` and `show stat` of lb's pool.
func servers(t *testing.T, inst *instance, backend string) map[string]server {
	t.Helper()
	ctx := context.Background()
	sock := inst.sh.at.Socket()
	state, err := inst.sh.proc.Runtime(ctx, sock, "show servers state "+backend)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]server{}
	for _, line := range strings.Split(state, "\n") {
		f := strings.Fields(line)
		if len(f) < 19 || f[1] != backend {
			continue
		}
		lc, _ := strconv.Atoi(f[9])
		out[f[3]] = server{addr: f[4] + ":" + f[18], lastChange: lc}
	}
	stat, err := inst.sh.proc.Runtime(ctx, sock, "show stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stat, "\n") {
		f := strings.Split(line, ",")
		if len(f) < 8 || f[0] != backend {
			continue
		}
		if s, ok := out[f[1]]; ok {
			s.sessions, _ = strconv.Atoi(f[7])
			out[f[1]] = s
		}
	}
	if len(out) == 0 {
		t.Fatalf("no servers of %s in:\n%s", backend, state)
	}
	return out
}

// TestStickySlotsThroughHAProxy: a pool serves from 127.0.0.2-6 (real
// echo backends); 127.0.0.1, which sorts below them all, joins. Every
// serving slot keeps its address, its counters and its uptime, one slot
// changes, the plan goes over one runtime connection, and nothing
// reloads. A new driver on the same folder renders the same bytes and
// adopts HAProxy without a reload.
func TestStickySlotsThroughHAProxy(t *testing.T) {
	needHAProxy(t)
	first := echo(t, "127.0.0.1:0", "m1")
	_, port, _ := net.SplitHostPort(first)
	var members []model.Member
	for i := 2; i <= 6; i++ {
		members = append(members, memberAt(echo(t, "127.0.0."+strconv.Itoa(i)+":"+port, "m"+strconv.Itoa(i))))
	}
	dir := harness.ShortTempDir(t)
	d := newDriver(t, dir)
	t.Cleanup(func() { d.Close(true) })
	lb := lbWith(0, freePort(t), members...)
	apply := func(d *Driver, lb *model.LoadBalancer) {
		t.Helper()
		if _, err := d.Apply(context.Background(), lb); err != nil {
			t.Fatal(err)
		}
	}
	apply(d, lb)
	for range 50 {
		if get(lb) == "" {
			t.Fatal("pool does not serve")
		}
	}
	inst := d.lbs[lb.UUID]
	backend := "be_" + lb.UUID + "_p1"
	time.Sleep(1100 * time.Millisecond) // so an uptime that restarts shows
	before, stats := servers(t, inst, backend), inst.sh.proc.Stats()

	next := lb.Clone()
	next.Pools[0].Members = append([]model.Member{memberAt(first)}, members...)
	apply(d, next)
	stats2 := inst.sh.proc.Stats()
	after := servers(t, inst, backend)

	if stats2.ReloadsOK != stats.ReloadsOK || stats2.ReloadsFailed != stats.ReloadsFailed || stats2.Restarts != stats.Restarts {
		t.Fatalf("reloads: before %+v, after %+v", stats, stats2)
	}
	if n := stats2.RuntimeConnections - stats.RuntimeConnections; n != 1 {
		t.Fatalf("the plan used %d runtime connections, want 1", n)
	}
	checkSticky(t, before, after, first)
	seen := map[string]bool{}
	for range 30 {
		seen[get(next)] = true
	}
	if !seen["m1"] || !seen["m6"] {
		t.Errorf("after the change, served by %v", seen)
	}
	restartKeepsSlots(t, d, dir, next)
}

// restartKeepsSlots: a new driver (an agent restart) renders the same
// fragment from the slot record and adopts HAProxy without a reload.
func restartKeepsSlots(t *testing.T, d *Driver, dir string, lb *model.LoadBalancer) {
	t.Helper()
	at, _ := d.layout.LB(lb.UUID)
	was, err := os.ReadFile(at.Config())
	if err != nil {
		t.Fatal(err)
	}
	d.Close(false)
	d2 := newDriver(t, dir)
	t.Cleanup(func() { d2.Close(true) })
	if err := d2.Recover(context.Background(), map[string]bool{lb.UUID: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Apply(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	now, _ := os.ReadFile(at.Config())
	if !bytes.Equal(now, was) {
		t.Fatalf("the restarted driver rendered another fragment:\n%s\nwas\n%s", now, was)
	}
	inst := d2.lbs[lb.UUID]
	if !inst.sh.proc.Adopted() || inst.sh.proc.Stats().ReloadsOK != 0 {
		t.Fatalf("adopted %v, reloads %+v", inst.sh.proc.Adopted(), inst.sh.proc.Stats())
	}
}

// checkSticky: exactly one slot changed, a free one, to first; the five
// that served kept their address, counters and uptime.
func checkSticky(t *testing.T, before, after map[string]server, first string) {
	t.Helper()
	changed := 0
	for name, b := range before {
		a := after[name]
		if a.addr != b.addr {
			changed++
			if a.addr != first || b.sessions != 0 {
				t.Errorf("%s: %s → %s, want a free slot taking %s", name, b.addr, a.addr, first)
			}
			continue
		}
		if b.sessions > 0 && (a.sessions < b.sessions || a.lastChange < b.lastChange) {
			t.Errorf("%s (%s): counters or uptime reset: before %+v, after %+v", name, b.addr, b, a)
		}
	}
	serving := 0
	for _, b := range before {
		if b.sessions > 0 {
			serving++
		}
	}
	if changed != 1 || serving != 5 {
		t.Fatalf("%d slots changed (want 1), %d slots served before (want 5):\nbefore %v\nafter %v", changed, serving, before, after)
	}
}
