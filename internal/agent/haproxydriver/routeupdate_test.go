package haproxydriver

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// getHost returns the body lb serves for host (empty: the address), or
// "" on any error or a status other than 200.
func getHost(lb *model.LoadBalancer, host string) string {
	c := http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port))+"/", nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return ""
	}
	return string(b)
}

// Hosts joining and leaving a load balancer, to pools it has, change its
// route maps through the runtime API: no reload. That still holds after
// another load balancer's join reloads the shard (the process then knows
// the maps by the files it read), and a new pool still reloads.
func TestShardsRoutesWithoutReload(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 1)
	t.Cleanup(func() { d.Close(true) })
	one, two := memberAt(echo(t, "127.0.0.1:0", "one")), memberAt(echo(t, "127.0.0.1:0", "two"))
	base := lbWith(1, freePort(t), one)
	base.Listeners[0].DefaultPoolID = ""
	base.Pools = append(base.Pools, model.Pool{ID: "p2", Name: "ns_api_80", Members: []model.Member{two}})
	hostTo := func(host, pool string) model.L7Policy {
		return model.L7Policy{ID: "r-" + strings.ReplaceAll(host, ".", "-"), Action: model.ActionRedirectToPool, PoolID: pool,
			Rules: []model.L7Rule{{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: host}}}
	}
	version := func(ps ...model.L7Policy) *model.LoadBalancer {
		lb := base.Clone()
		for i := range ps {
			ps[i].Position = i + 1
		}
		lb.Listeners[0].Policies = ps
		return lb
	}
	apply := func(lb *model.LoadBalancer) {
		t.Helper()
		if _, err := d.Apply(t.Context(), lb); err != nil {
			t.Fatal(err)
		}
	}
	// The shard's reloads (whichever load balancer caused them) and this
	// load balancer's runtime updates.
	reloads := func() (float64, uint64) {
		d.mu.Lock()
		defer d.mu.Unlock()
		return testutil.ToFloat64(d.cfg.Metrics.Reloads.WithLabelValues("ok")), d.lbs[base.UUID].stats.RuntimeUpdates
	}
	expect := func(stage string, lb *model.LoadBalancer, want map[string]string) {
		t.Helper()
		for host, body := range want {
			if got := getHost(lb, host); got != body {
				t.Errorf("%s: %s answered %q, want %q", stage, host, got, body)
			}
		}
	}

	v1 := version(hostTo("a.example", "p1"))
	apply(v1)
	expect("v1", v1, map[string]string{"a.example": "one", "b.example": ""})
	r0, u0 := reloads()

	v2 := version(hostTo("a.example", "p1"), hostTo("b.example", "p2"))
	apply(v2)
	expect("b joined", v2, map[string]string{"a.example": "one", "b.example": "two"})
	v3 := version(hostTo("b.example", "p2"), hostTo("c.example", "p1"))
	apply(v3)
	expect("a left, c joined", v3, map[string]string{"a.example": "", "b.example": "two", "c.example": "one"})
	if r, u := reloads(); r != r0 || u != u0+2 {
		t.Fatalf("route changes: %v reloads and %d runtime updates since v1, want 0 and 2", r-r0, u-u0)
	}

	// Another load balancer joins the shard: one reload, after which the
	// process knows this one's maps by their current files.
	other := lbWith(2, freePort(t), one)
	apply(other)
	if r, _ := reloads(); r != r0+1 {
		t.Fatalf("a join reloaded the shard %v times, want once", r-r0)
	}
	v4 := version(hostTo("b.example", "p2"), hostTo("d.example", "p2"))
	apply(v4)
	expect("after the shard reloaded, d joined", v4, map[string]string{"b.example": "two", "c.example": "", "d.example": "two"})
	if r, u := reloads(); r != r0+1 || u != u0+3 {
		t.Fatalf("after the shard reload: %v reloads and %d runtime updates since v1, want 1 and 3", r-r0, u-u0)
	}

	// A route to a pool the load balancer did not have needs its backend:
	// a reload.
	v5 := v4.Clone()
	v5.Pools = append(v5.Pools, model.Pool{ID: "p3", Name: "ns_new_80", Members: []model.Member{one}})
	v5.Listeners[0].Policies = append(v5.Listeners[0].Policies, hostTo("e.example", "p3"))
	v5.Listeners[0].Policies[2].Position = 3
	apply(v5)
	expect("a new pool", v5, map[string]string{"e.example": "one", "d.example": "two"})
	if r, _ := reloads(); r != r0+2 {
		t.Fatalf("a new pool: %v reloads since v1, want 2", r-r0)
	}
}

// An Ingress group's load balancer takes a pool it did not have (a
// joining Ingress with a new Service) in a spare backend: no reload.
func TestShardsGroupJoinsWithoutReload(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 1)
	t.Cleanup(func() { d.Close(true) })
	one, two := memberAt(echo(t, "127.0.0.1:0", "one")), memberAt(echo(t, "127.0.0.1:0", "two"))
	group := lbWith(3, freePort(t), one)
	group.Name = "group:shop"
	group.Listeners[0].DefaultPoolID = ""
	group.Listeners[0].Policies = []model.L7Policy{{ID: "r-a", Position: 1, Action: model.ActionRedirectToPool, PoolID: "p1",
		Rules: []model.L7Rule{{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: "a.example"}}}}
	if _, err := d.Apply(t.Context(), group); err != nil {
		t.Fatal(err)
	}
	reloads := func() float64 { return testutil.ToFloat64(d.cfg.Metrics.Reloads.WithLabelValues("ok")) }
	before := reloads()
	joined := group.Clone()
	joined.Pools = append(joined.Pools, model.Pool{ID: "p2", Name: "ns_api_80", // the shape of p1: a spare fits it
		Members: []model.Member{two}})
	joined.Listeners[0].Policies = append([]model.L7Policy{{ID: "r-b", Position: 1, Action: model.ActionRedirectToPool, PoolID: "p2",
		Rules: []model.L7Rule{{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: "b.example"}}}}, joined.Listeners[0].Policies...)
	joined.Listeners[0].Policies[1].Position = 2
	if _, err := d.Apply(t.Context(), joined); err != nil {
		t.Fatal(err)
	}
	if got := getHost(joined, "b.example"); got != "two" {
		t.Fatalf("b.example answered %q, want two (the new pool)", got)
	}
	if got := getHost(joined, "a.example"); got != "one" {
		t.Fatalf("a.example answered %q, want one", got)
	}
	if r := reloads(); r != before {
		t.Fatalf("the join reloaded %v times, want none", r-before)
	}
	// The agent reads the new pool's members through the spare's name.
	if err := d.RefreshMembers(t.Context(), []string{joined.UUID}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		_ = d.RefreshMembers(t.Context(), []string{joined.UUID})
		return d.Stats(joined.UUID).MembersUp == 2
	})
}

// A member change in a shard is applied through the runtime API and not
// checked again with haproxy -c: its fragment differs from the checked
// one only in server values (render.MembersOnly). The fragment on disk
// and the staged set follow it, another load balancer's reload of the
// shard (which checks the whole set) keeps serving the new member, and
// a route change is still checked.
func TestShardsMemberChangeSkipsCheck(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	d := newSharded(t, state, 1)
	d.cfg.Binary = refusingHAProxy(t, state)
	t.Cleanup(func() { d.Close(true) })
	one, two := memberAt(echo(t, "127.0.0.1:0", "one")), memberAt(echo(t, "127.0.0.1:0", "two"))
	checks := func(result string) float64 {
		return testutil.ToFloat64(d.cfg.Metrics.FragmentChecks.WithLabelValues(result))
	}
	apply := func(lb *model.LoadBalancer) {
		t.Helper()
		if _, err := d.Apply(t.Context(), lb); err != nil {
			t.Fatal(err)
		}
	}
	reloads := func() float64 { return testutil.ToFloat64(d.cfg.Metrics.Reloads.WithLabelValues("ok")) }

	route := func(host string) model.L7Policy {
		return model.L7Policy{ID: "r-" + strings.ReplaceAll(host, ".", "-"), Action: model.ActionRedirectToPool, PoolID: "p1",
			Rules: []model.L7Rule{{Type: model.RuleHostName, Compare: model.CompareEqualTo, Value: host}}}
	}
	v1 := lbWith(1, freePort(t), one)
	v1.Listeners[0].Policies = []model.L7Policy{route("a.example")}
	v1.Listeners[0].Policies[0].Position = 1
	apply(v1)
	r0, ok0 := reloads(), checks("ok")
	v2 := v1.Clone()
	v2.Pools[0].Members = []model.Member{two}
	apply(v2)
	if got := getHost(v2, "a.example"); got != "two" {
		t.Fatalf("after the member change: %q, want two", got)
	}
	if reloads() != r0 || checks("skipped") != 1 || checks("ok") != ok0 {
		t.Fatalf("member change: %v reloads, %v checks skipped, %v run; want 0, 1, 0", reloads()-r0, checks("skipped"), checks("ok")-ok0)
	}
	d.mu.Lock()
	inst := d.lbs[v1.UUID]
	d.mu.Unlock()
	onDisk, err := os.ReadFile(inst.at.Config())
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(" %s:%d ", two.Address, two.Port); !strings.Contains(string(onDisk), want) {
		t.Fatalf("the fragment on disk has no server at%s:\n%s", want, onDisk)
	}
	// The set a supervisor restart or a new agent starts from has it too.
	if changed, err := inst.sh.proc.ConfigChanged(); err != nil || changed {
		t.Fatalf("after the member change, the active set differs from the files: %v, %v", changed, err)
	}

	// Another load balancer joins: the shard reloads with every fragment,
	// this one's unchecked member change included, and it still serves two.
	apply(lbWith(2, freePort(t), one))
	if reloads() != r0+1 {
		t.Fatalf("a join: %v reloads, want 1", reloads()-r0)
	}
	if got := getHost(v2, "a.example"); got != "two" {
		t.Fatalf("after the shard's reload: %q, want two", got)
	}

	// A route is not a member change: a runtime update checked alone.
	ok1 := checks("ok")
	v3 := v2.Clone()
	v3.Listeners[0].Policies = append(v3.Listeners[0].Policies, route("b.example"))
	v3.Listeners[0].Policies[1].Position = 2
	apply(v3)
	if got := getHost(v3, "b.example"); got != "two" {
		t.Fatalf("after the route change: %q, want two", got)
	}
	if reloads() != r0+1 || checks("skipped") != 1 || checks("ok") != ok1+1 {
		t.Fatalf("route change: %v reloads, %v checks skipped, %v run; want 0, 1 and 1", reloads()-r0-1, checks("skipped"), checks("ok")-ok1)
	}

	// A route with members HAProxy's check refuses (refusingHAProxy):
	// the commands are taken back, and the last good spec serves: two,
	// never one or the refused address (every host falls to p1).
	bad := v3.Clone()
	bad.Listeners[0].Policies = append(bad.Listeners[0].Policies, route("c.example"))
	bad.Listeners[0].Policies[2].Position = 3
	bad.Pools[0].Members = []model.Member{one, {Address: refusedAddress, Port: one.Port, Weight: 1}}
	if _, err := d.Apply(t.Context(), bad); !errors.Is(err, driver.ErrRejected) {
		t.Fatalf("a refused route change: got %v, want ErrRejected", err)
	}
	if checks("refused") != 1 || reloads() != r0+1 {
		t.Fatalf("a refused route change: %v checks refused, %v reloads; want 1 and 0", checks("refused"), reloads()-r0-1)
	}
	for _, host := range []string{"a.example", "b.example", "c.example"} {
		for range 4 { // round robin over both slots, had the refused members stayed
			if got := getHost(v3, host); got != "two" {
				t.Fatalf("after the refused change, %s: %q, want two", host, got)
			}
		}
	}
}

// A member change in a shard writes its files after the runtime commands.
// Should the writes fail, the commands are taken back: HAProxy keeps
// serving what the files say, the apply fails, and the same spec applies
// once the files can be written.
func TestMemberChangeUnwrittenIsTakenBack(t *testing.T) {
	needHAProxy(t)
	state := harness.ShortTempDir(t)
	d := newSharded(t, state, 1)
	t.Cleanup(func() { d.Close(true) })
	one, two := memberAt(echo(t, "127.0.0.1:0", "one")), memberAt(echo(t, "127.0.0.1:0", "two"))
	reloads := func() float64 { return testutil.ToFloat64(d.cfg.Metrics.Reloads.WithLabelValues("ok")) }

	v1 := lbWith(1, freePort(t), one)
	if _, err := d.Apply(t.Context(), v1); err != nil {
		t.Fatal(err)
	}
	r0 := reloads()
	d.mu.Lock()
	inst := d.lbs[v1.UUID]
	d.mu.Unlock()
	// A folder where the slot record goes: writing it fails.
	slots := inst.at.Slots()
	if err := os.Remove(slots); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(slots, 0o700); err != nil {
		t.Fatal(err)
	}
	v2 := v1.Clone()
	v2.Pools[0].Members = []model.Member{two}
	if _, err := d.Apply(t.Context(), v2); err == nil {
		t.Fatal("a member change whose files cannot be written applied")
	}
	for range 4 { // both slots, had the new member stayed
		if got := get(v1); got != "one" {
			t.Fatalf("after the unwritten change: %q, want one (taken back)", got)
		}
	}
	onDisk, err := os.ReadFile(inst.at.Config())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(onDisk), fmt.Sprintf(" %s:%d ", two.Address, two.Port)) {
		t.Fatalf("the fragment on disk names the member that was taken back:\n%s", onDisk)
	}

	if err := os.Remove(slots); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(t.Context(), v2); err != nil {
		t.Fatalf("the same change once the files can be written: %v", err)
	}
	if got := get(v2); got != "two" {
		t.Fatalf("after the change: %q, want two", got)
	}
	if reloads() != r0 {
		t.Fatalf("%v reloads, want none: both attempts are runtime updates", reloads()-r0)
	}
}
