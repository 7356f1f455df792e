package render

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

func planFixture(members ...model.Member) *model.LoadBalancer {
	web := pool("web", members...)
	return newLB([]model.Listener{httpListener(web.ID, routes(toPool(web, hostIs("a.example"))))}, web)
}

func members(n int) []model.Member {
	var ms []model.Member
	for i := 1; i <= n; i++ {
		ms = append(ms, member("10.0.0."+strconv.Itoa(i), 8080))
	}
	return ms
}

// mustPlan renders old, then new with old's slots, as the agent does.
func mustPlan(t *testing.T, old, new *model.LoadBalancer) Plan {
	t.Helper()
	p, _, _ := planResults(t, old, new)
	return p
}

func planResults(t *testing.T, old, new *model.LoadBalancer) (Plan, *Result, *Result) {
	t.Helper()
	var or *Result
	var prev Slots
	if old != nil {
		or = mustRender(t, old, nil)
		prev = or.Slots
	}
	nr := mustRender(t, new, prev)
	p, err := PlanUpdate(or, nr)
	if err != nil {
		t.Fatal(err)
	}
	return p, or, nr
}

func commands(p Plan) []string {
	var out []string
	for _, c := range p.Commands {
		out = append(out, c.String())
	}
	return out
}

func TestPlanReloads(t *testing.T) {
	base := planFixture(members(3)...)
	mod := func(f func(lb *model.LoadBalancer)) *model.LoadBalancer {
		lb := base.Clone()
		f(lb)
		return lb
	}
	webID := base.Pools[0].ID
	for _, tc := range []struct {
		name   string
		old    *model.LoadBalancer
		new    *model.LoadBalancer
		reason string
	}{
		{"first start", nil, base, "first start"},
		{"vip", base, mod(func(lb *model.LoadBalancer) { lb.VIP = "10.96.0.11" }), "vip changed 10.96.0.10→10.96.0.11"},
		{"fip removed", base, mod(func(lb *model.LoadBalancer) { lb.FIP = "" }), "fip changed 203.0.113.10→none"},
		{"listener added", base, mod(func(lb *model.LoadBalancer) {
			l := lb.Listeners[0]
			l.Port = 8080
			lb.Listeners = append(lb.Listeners, l)
		}), "listeners changed [80]→[80 8080]"},
		{"slots", base, planFixture(members(17)...), "pool " + webID + " slots 16→32"},
		{"rule to a new pool", base, func() *model.LoadBalancer {
			web, api := pool("web", members(3)...), pool("api", members(1)...)
			return newLB([]model.Listener{httpListener(web.ID, routes(toPool(web, hostIs("a.example")), toPool(api, hostIs("b.example"))))}, web, api)
		}(), "listener 80 routing rules changed"},

		{"check", base, mod(func(lb *model.LoadBalancer) { lb.Pools[0].HealthCheck = false }), "pool " + webID + " settings changed"},
		{"default pool", base, mod(func(lb *model.LoadBalancer) { lb.Listeners[0].DefaultPoolID = "" }), "listener 80 routing rules changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustPlan(t, tc.old, tc.new)
			if !p.Reload || p.Reason != tc.reason || len(p.Commands) != 0 {
				t.Fatalf("got %+v, want reload %q", p, tc.reason)
			}
		})
	}
}

func TestPlanCertificateRotationReloads(t *testing.T) {
	var old *model.LoadBalancer
	for _, f := range fixtures() {
		if f.name == "tls-two-certs" {
			old = f.lb
		}
	}
	rotated := old.Clone()
	rotated.Listeners[1].Certificates[0].SHA256 = "cc"
	if p := mustPlan(t, old, rotated); !p.Reload || p.Reason != "listener 443 certificates changed" {
		t.Fatalf("got %+v", p)
	}
}

func TestPlanMembersOnly(t *testing.T) {
	old := planFixture(members(3)...)
	// 10.0.0.2 leaves, 10.0.0.9 arrives with weight 5, 10.0.0.3 gets weight 2.
	new := planFixture(member("10.0.0.1", 8080), member("10.0.0.3", 8080), member("10.0.0.9", 9090))
	new.Pools[0].Members[1].Weight = 2
	new.Pools[0].Members[2].Weight = 5
	p := mustPlan(t, old, new)
	be := "be_" + fixtureUUID + "_" + old.Pools[0].ID
	// Sticky slots: 10.0.0.3 stays in s3; 10.0.0.9 takes s4, a slot that
	// was free, not s2, which 10.0.0.2 just left. What serves afterwards
	// is set first, s2 emptied last: the pool never has fewer servers
	// than either side of the change.
	want := []string{
		"set server " + be + "/s3 weight 2",
		"set server " + be + "/s4 addr 10.0.0.9 port 9090",
		"set server " + be + "/s4 weight 5",
		"set server " + be + "/s4 state ready",
		"set server " + be + "/s2 state maint",
		"set server " + be + "/s2 addr 127.0.0.1 port 1",
	}
	if p.Reload || !slices.Equal(commands(p), want) {
		t.Fatalf("got %+v\nwant %q", p, want)
	}
	// Emptying slots: maint first, then back to the placeholder.
	p = mustPlan(t, old, planFixture(member("10.0.0.1", 8080)))
	want = []string{
		"set server " + be + "/s2 state maint",
		"set server " + be + "/s2 addr 127.0.0.1 port 1",
		"set server " + be + "/s3 state maint",
		"set server " + be + "/s3 addr 127.0.0.1 port 1",
	}
	if p.Reload || !slices.Equal(commands(p), want) {
		t.Fatalf("got %q\nwant %q", commands(p), want)
	}
	if p := mustPlan(t, old, old.Clone()); p.Reload || len(p.Commands) != 0 {
		t.Fatalf("no change gave %+v", p)
	}
}

// TestPlanReachesRenderedState replays the commands on a model of the
// runtime state and checks it ends where a restart from the new fragment
// starts.
func TestPlanReachesRenderedState(t *testing.T) {
	sizes := [][2]int{{0, 16}, {16, 0}, {5, 9}, {9, 5}, {1, 1}, {12, 3}}
	for _, sz := range sizes {
		old := planFixture(shuffled(members(sz[0]), 7)...)
		new := planFixture(shuffled(append(members(sz[1]/2), member("10.9.9.9", 1)), 3)...)
		new.Pools[0].Members = new.Pools[0].Members[:min(len(new.Pools[0].Members), sz[1])]
		p, or, nr := planResults(t, old, new)
		if p.Reload {
			t.Fatalf("%v: reload %s", sz, p.Reason)
		}
		state := runtimeState(or.Fragment)
		for _, c := range p.Commands {
			applyCommand(t, state, c.String())
		}
		if want := runtimeState(nr.Fragment); !slices.Equal(state, want) {
			t.Fatalf("%v: after commands %v\nrendered %v", sz, state, want)
		}
	}
}

func shuffled(ms []model.Member, step int) []model.Member {
	out := slices.Clone(ms)
	for i := range out {
		j := (i * step) % len(out)
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// runtimeState reads "server" lines of the rendered config as slot states.
func runtimeState(cfg []byte) []string {
	var out []string
	for _, line := range strings.Split(string(cfg), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "server" {
			continue
		}
		ap := netip.MustParseAddrPort(f[2])
		state := "ready"
		if slices.Contains(f, "disabled") {
			state = "maint"
		}
		out = append(out, f[1]+" "+ap.Addr().String()+" "+strconv.Itoa(int(ap.Port()))+" "+f[4]+" "+state)
	}
	return out
}

func applyCommand(t *testing.T, state []string, cmd string) {
	f := strings.Fields(cmd)
	srv := strings.SplitN(f[2], "/", 2)[1]
	for i, s := range state {
		cur := strings.Fields(s)
		if cur[0] != srv {
			continue
		}
		switch f[3] {
		case "addr":
			cur[1], cur[2] = f[4], f[6]
		case "weight":
			cur[3] = f[4]
		case "state":
			cur[4] = f[4]
		}
		state[i] = strings.Join(cur, " ")
		return
	}
	t.Fatalf("command for unknown server: %s", cmd)
}

// A routes-only change (a host re-pointed, added or removed, to pools
// that exist) goes through map commands on the map the process loaded,
// also after earlier runtime updates renamed its file, until a reload.
func TestPlanRoutesOnly(t *testing.T) {
	web, api := pool("web", members(2)...), pool("api", members(1)...)
	lbWith := func(hosts ...string) *model.LoadBalancer {
		var ps []model.L7Policy // translate's order: prefixes before a host's catch-all
		for _, h := range hosts {
			ps = append(ps, toPool(api, hostIs(h), pathPrefix("/v1")))
		}
		ps = append(ps, toPool(web, hostIs("a.example")))
		return newLB([]model.Listener{httpListener(web.ID, routes(ps...))}, web, api)
	}
	p, first, second := planResults(t, lbWith("b.example"), lbWith("c.example", "d.example"))
	loaded := first.Maps[len(first.Maps)-1].Path // the prefix map: b.example/v1/
	if !strings.Contains(loaded, "host.prefix") {
		t.Fatalf("maps %v", first.Maps)
	}
	be := "be_" + fixtureUUID + "_" + api.ID
	want := []string{
		"add map " + loaded + " c.example/v1/ " + be,
		"add map " + loaded + " d.example/v1/ " + be,
		"del map " + loaded + " b.example/v1/",
	}
	if p.Reload || !p.Routes || !slices.Equal(commands(p), want) {
		t.Fatalf("plan %+v\nwant commands %q", p, want)
	}
	// A key outside the runtime allow-list (valid in a map file) reloads.
	semi := lbWith("b.example")
	semi.Listeners[0].Policies[0].Rules[1] = pathPrefix("/v1;x")
	if p := mustPlan(t, lbWith("b.example"), semi); !p.Reload || !strings.Contains(p.Reason, "contains ';'") {
		t.Fatalf("a path with ';': %+v, want a reload", p)
	}
	// The new result's prefix map is another file; the process knows
	// it by the one it loaded.
	second.RunsWith(p)
	third := mustRender(t, lbWith("d.example"), second.Slots)
	p2, err := PlanUpdate(second, third)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"del map " + loaded + " c.example/v1/"}; p2.Reload || !slices.Equal(commands(p2), want) {
		t.Fatalf("second plan %+v, want %q", p2, want)
	}
	// A members-only change keeps the names.
	third.RunsWith(p2)
	moved := lbWith("d.example")
	for i := range moved.Pools {
		if moved.Pools[i].ID == api.ID {
			moved.Pools[i].Members[0].Address = "10.0.0.7"
		}
	}
	fourth := mustRender(t, moved, third.Slots)
	p3, err := PlanUpdate(third, fourth)
	if err != nil || p3.Reload || p3.Routes || p3.names.maps["80 host.prefix"] != loaded {
		t.Fatalf("members-only plan %+v %v: names %v", p3, err, p3.names)
	}
	// Once reloaded, the process knows the files of what it loaded.
	fourth.Reloaded()
	fifth := mustRender(t, lbWith("d.example", "e.example"), fourth.Slots)
	p5, err := PlanUpdate(fourth, fifth)
	if err != nil || p5.Reload || len(p5.Commands) != 1 || strings.Contains(p5.Commands[0].String(), loaded) {
		t.Fatalf("after a reload: %+v %v, want one command on the file fourth loaded", p5, err)
	}
}
