package haproxydriver

import (
	"context"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestStatsThroughHAProxy: a member joining counts a runtime update, a
// listener port changing counts a reload, and the members up follow what
// HAProxy says once a member is put in maintenance behind the driver's
// back.
func TestStatsThroughHAProxy(t *testing.T) {
	needHAProxy(t)
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	ctx := context.Background()
	lb := lbWith(3, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")), memberAt(echo(t, "127.0.0.1:0", "two")))
	apply := func() {
		t.Helper()
		if _, err := d.Apply(ctx, lb); err != nil {
			t.Fatal(err)
		}
		if err := d.RefreshMembers(ctx, []string{lb.UUID}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(when string, s driver.Stats) {
		t.Helper()
		if got := d.Stats(lb.UUID); got != s {
			t.Fatalf("%s: stats %+v, want %+v", when, got, s)
		}
	}
	apply()
	want("started", driver.Stats{MembersUp: 2, Members: 2})

	lb = lb.Clone()
	lb.Pools[0].Members = append(lb.Pools[0].Members, memberAt(echo(t, "127.0.0.1:0", "three")))
	apply()
	want("a member joined", driver.Stats{RuntimeUpdates: 1, MembersUp: 3, Members: 3})

	lb = lb.Clone()
	lb.Listeners[0].Port = freePort(t)
	apply()
	want("the port changed", driver.Stats{Reloads: 1, RuntimeUpdates: 1, MembersUp: 3, Members: 3})

	inst := d.lbs[lb.UUID]
	if _, err := inst.sh.proc.Runtime(ctx, inst.sh.at.Socket(), "set server be_"+lb.UUID+"_p1/s2 state maint"); err != nil {
		t.Fatal(err)
	}
	if err := d.RefreshMembers(ctx, []string{lb.UUID}); err != nil {
		t.Fatal(err)
	}
	want("a member in maintenance", driver.Stats{Reloads: 1, RuntimeUpdates: 1, MembersUp: 2, Members: 3})
	if got := d.Stats("0f8a2d3e-1111-4222-8333-444455556699"); got != (driver.Stats{}) {
		t.Fatalf("stats of a load balancer never applied: %+v", got)
	}
}

// TestShardMembersReadAtOnce: the members up of the load balancers of a
// shard are read over one runtime API connection, and each load balancer
// gets its own count; one not applied here is passed over.
func TestShardMembersReadAtOnce(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 1)
	t.Cleanup(func() { d.Close(true) })
	ctx := context.Background()
	var lbs []*model.LoadBalancer
	for n, names := range [][]string{{"a1", "a2"}, {"b1"}, {"c1", "c2", "c3"}} {
		var members []model.Member
		for _, name := range names {
			members = append(members, memberAt(echo(t, "127.0.0.1:0", name)))
		}
		lb := lbWith(n+1, freePort(t), members...)
		if _, err := d.Apply(ctx, lb); err != nil {
			t.Fatal(err)
		}
		lbs = append(lbs, lb)
	}
	last := lbs[2]
	inst := d.lbs[last.UUID]
	if _, err := inst.sh.proc.Runtime(ctx, inst.sh.at.Socket(), "set server be_"+last.UUID+"_p1/s2 state maint"); err != nil {
		t.Fatal(err)
	}
	conns := inst.sh.proc.Stats().RuntimeConnections
	uuids := []string{lbs[0].UUID, lbs[1].UUID, last.UUID, "0f8a2d3e-1111-4222-8333-444455556699"}
	if err := d.RefreshMembers(ctx, uuids); err != nil {
		t.Fatal(err)
	}
	if got := inst.sh.proc.Stats().RuntimeConnections - conns; got != 1 {
		t.Fatalf("%d runtime API connections for one shard's members, want 1", got)
	}
	for i, want := range []int{2, 1, 2} {
		if got := d.Stats(lbs[i].UUID); got.MembersUp != want || got.Members != len(lbs[i].Pools[0].Members) {
			t.Errorf("%s: %d of %d members up, want %d of %d", lbs[i].Name, got.MembersUp, got.Members, want, len(lbs[i].Pools[0].Members))
		}
	}
}

// TestMembersUp parses `show servers state` as HAProxy 2.6 prints it:
// free slots, other backends and servers not RUNNING do not count.
func TestMembersUp(t *testing.T) {
	answer := `1
# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change
3 be_x_p1 1 s1 10.0.0.1 2 0 1 1 7
3 be_x_p1 2 s2 10.0.0.2 0 1 1 1 7
3 be_x_p1 3 s3 127.0.0.1 0 5 1 1 7
4 be_y_p1 1 s1 10.0.0.9 2 0 1 1 7
5 be_x_p2 1 s1 10.0.0.3 2 0 1 1 7
6	be_x_p3  1   s1 10.0.0.4 2 0 1 1 7` + "\r" + `
7 be_x_p4 1 s1 2
`
	members := []render.Server{{Backend: "be_x_p1", Name: "s1"}, {Backend: "be_x_p1", Name: "s2"}, {Backend: "be_x_p2", Name: "s1"},
		{Backend: "be_x_p3", Name: "s1"}, {Backend: "be_x_p4", Name: "s1"}}
	// be_x_p3's line, tabs, runs of spaces and a CR, counts; be_x_p4's,
	// cut short of srv_op_state, does not.
	if got := membersUp(answer, members); got != 3 {
		t.Fatalf("membersUp = %d, want 3", got)
	}
	if got := membersUp("", members); got != 0 {
		t.Fatalf("membersUp of an empty answer = %d", got)
	}
}

// DroppedLogs grows within a worker and starts again in the next one (a
// reload); the counter takes the growth only.
func TestCountDropped(t *testing.T) {
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "x"})
	sh := &shard{}
	info := func(pid string, n int) string {
		return "Name: HAProxy\nPid: " + pid + "\nDroppedLogs: " + strconv.Itoa(n) + "\nUptime_sec: 3\n"
	}
	for _, step := range []struct {
		info string
		want float64
	}{
		{info("10", 5), 0},  // first read: drops before it are not this agent's to tell
		{info("10", 12), 7}, // grew by 7
		{info("10", 12), 7},
		{info("11", 3), 10}, // a new worker: all of its drops
		{"garbage", 10},
		{info("11", 4), 11},
	} {
		sh.countDropped(step.info, c)
		if got := testutil.ToFloat64(c); got != step.want {
			t.Fatalf("after %q: %v, want %v", step.info, got, step.want)
		}
	}
}
