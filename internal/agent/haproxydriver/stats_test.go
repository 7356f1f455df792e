package haproxydriver

import (
	"context"
	"net/netip"
	"reflect"
	"slices"
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
		if got := d.Stats(lb.UUID); !reflect.DeepEqual(got, s) {
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
	var down []string
	for _, m := range inst.result.Members() {
		if m.Name == "s2" {
			down = append(down, m.Addr.String())
		}
	}
	want("a member in maintenance", driver.Stats{Reloads: 1, RuntimeUpdates: 1, MembersUp: 2, Members: 3, MembersDown: down})

	// Requests count from the first read on: five more, of which none
	// is a 5xx.
	for range 5 {
		if get(lb) == "" {
			t.Fatal("no answer through the load balancer")
		}
	}
	if err := d.RefreshMembers(ctx, []string{lb.UUID}); err != nil {
		t.Fatal(err)
	}
	want("five requests", driver.Stats{Reloads: 1, RuntimeUpdates: 1, MembersUp: 2, Members: 3, MembersDown: down, Requests: 5})
	if got := d.Stats("0f8a2d3e-1111-4222-8333-444455556699"); !reflect.DeepEqual(got, driver.Stats{}) {
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
// free slots, other backends and servers not RUNNING do not count, and
// the members down are listed once each.
func TestMembersUp(t *testing.T) {
	answer := `1
# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change
3 be_x_p1 1 s1 10.0.0.1 2 0 1 1 7
3 be_x_p1 2 s2 10.0.0.2 0 1 1 1 7
3 be_x_p1 3 s3 127.0.0.1 0 5 1 1 7
4 be_y_p1 1 s1 10.0.0.9 2 0 1 1 7
5 be_x_p2 1 s1 10.0.0.3 2 0 1 1 7
5 be_x_p2 2 s2 10.0.0.2 0 0 1 1 7
6	be_x_p3  1   s1 10.0.0.4 2 0 1 1 7` + "\r" + `
7 be_x_p4 1 s1 2
`
	m := func(be, name, addr string) render.Member {
		return render.Member{Server: render.Server{Backend: be, Name: name}, Addr: netip.MustParseAddrPort(addr)}
	}
	members := []render.Member{m("be_x_p1", "s1", "10.0.0.1:80"), m("be_x_p1", "s2", "10.0.0.2:80"), m("be_x_p2", "s1", "10.0.0.3:80"),
		m("be_x_p2", "s2", "10.0.0.2:80"), m("be_x_p3", "s1", "10.0.0.4:80"), m("be_x_p4", "s1", "10.0.0.5:80")}
	// be_x_p3's line, tabs, runs of spaces and a CR, counts; be_x_p4's,
	// cut short of srv_op_state, does not.
	running := serversRunning(answer)
	if got := upOf(members, running); got != 3 {
		t.Fatalf("up = %d, want 3", got)
	}
	if got, want := downOf(members, running), []string{"10.0.0.2:80", "10.0.0.5:80"}; !slices.Equal(got, want) {
		t.Fatalf("down = %v, want %v", got, want)
	}
	if got := upOf(members, serversRunning("")); got != 0 {
		t.Fatalf("up of an empty answer = %d", got)
	}
}

// TestFrontendStat reads the counters of `show stat <frontend> 1 -1` as
// HAProxy 2.6 prints them, by the header's names.
func TestFrontendStat(t *testing.T) {
	answer := "# pxname,svname,qcur,stot,hrsp_4xx,hrsp_5xx,req_rate,req_tot,mode,\n" +
		"fe_x_80,FRONTEND,,7,3,2,0,41,http,\n\n"
	got, ok := frontendStat(answer)
	if !ok || got != (frontendCounters{requests: 41, errors5xx: 2}) {
		t.Fatalf("frontendStat = %+v %v", got, ok)
	}
	if _, ok := frontendStat("Unknown frontend.\n"); ok {
		t.Fatal("an error answer read as counters")
	}
}

// TestCountRequests: the first read sets the baseline; later reads add
// what each frontend took; a new worker generation, or counters that went
// down, start from zero.
func TestCountRequests(t *testing.T) {
	var i instance
	c := func(req, e uint64) frontendCounters { return frontendCounters{requests: req, errors5xx: e} }
	steps := []struct {
		gen       uint64
		now       map[string]frontendCounters
		req, errs uint64
	}{
		{1, map[string]frontendCounters{"a": c(100, 5)}, 0, 0},
		{1, map[string]frontendCounters{"a": c(130, 6), "b": c(4, 0)}, 34, 1},
		{2, map[string]frontendCounters{"a": c(10, 1), "b": c(2, 0)}, 46, 2},
		{2, map[string]frontendCounters{"a": c(3, 0), "b": c(5, 0)}, 52, 2},
	}
	for n, s := range steps {
		i.countRequests(s.gen, s.now)
		if i.stats.Requests != s.req || i.stats.Errors5xx != s.errs {
			t.Fatalf("step %d: %d requests, %d 5xx; want %d, %d", n, i.stats.Requests, i.stats.Errors5xx, s.req, s.errs)
		}
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
