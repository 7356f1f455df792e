package render

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// landingFixtureOptions: three spare backends of the fixtures' slots.
func landingFixtureOptions() LandingOptions {
	return LandingOptions{Port: 80, Backends: 3, Slots: 16, BackendMaxConn: DefaultBackendMaxConn}
}

var landingFixtureAt = layout.Process{Dir: "/var/lib/pier/haproxy/landing"}

// landingPool is pool without health checks: what an Ingress has unless
// an annotation asks for them.
func landingPool(svc string, members ...model.Member) model.Pool {
	p := pool(svc, members...)
	p.HealthCheck = false
	return p
}

// landableFixture: exact and prefix paths of two hosts, a wildcard, a
// reject and a host-less catch-all.
func landableFixture() *model.LoadBalancer {
	a := landingPool("a", member("10.0.0.1", 8080), member("10.0.0.2", 8080))
	b := landingPool("b", member("10.0.0.3", 8080))
	lb := newLB([]model.Listener{httpListener(b.ID, routes(
		toPool(a, hostIs("shop.example"), pathIs("/cart")),
		reject(hostIs("shop.example"), pathIs("/admin")),
		toPool(b, hostIs("shop.example"), pathPrefix("/cart")),
		toPool(a, hostWild("*.shop.example"), pathPrefix("/")),
		toPool(b, pathPrefix("/")),
	))}, a, b)
	lb.VIP, lb.FIP = "10.96.0.10", "203.0.113.10"
	return lb
}

func TestLandingGolden(t *testing.T) {
	cfg, err := LandingConfig(landingFixtureAt, landingFixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "landing.conf", cfg)
	assertLinesTokenize(t, cfg)
	r := mustRender(t, landableFixture(), nil)
	plan, err := PlanLanding(r, landingFixtureAt, landingFixtureOptions(), 7, []int{2, 0})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, step := range []struct {
		name string
		cmds []string
	}{{"land", commandLines(plan.Land)}, {"unbind", commandLines(plan.Unbind)}, {"retire", commandLines(plan.Retire)}} {
		b.WriteString("# " + step.name + "\n" + strings.Join(step.cmds, "\n") + "\n")
	}
	golden(t, "landing.plan", []byte(b.String()))
	// The addresses come last: once one answers, everything it routes to
	// is in place.
	last := commandLines(plan.Land)
	if !strings.HasPrefix(last[len(last)-1], "add map /var/lib/pier/haproxy/landing/vips.map 203.0.113.10 7") ||
		!strings.HasPrefix(last[len(last)-2], "add map /var/lib/pier/haproxy/landing/vips.map 10.96.0.10 7") {
		t.Fatalf("land does not end with the addresses: %q", last[len(last)-2:])
	}
}

// TestLandingCheck: haproxy -c -dW accepts the landing configuration
// with global.conf and its process.conf.
func TestLandingCheck(t *testing.T) {
	bin := haproxyBin(t)
	dir := t.TempDir()
	at := layout.Process{Dir: dir}
	writeLandingFiles(t, at, landingFixtureOptions())
	checkFiles(t, bin, dir, filepath.Join(dir, "landing.conf"))
}

// writeLandingFiles writes the landing's config and its empty maps.
func writeLandingFiles(t *testing.T, at layout.Process, o LandingOptions) {
	t.Helper()
	cfg, err := LandingConfig(at, o)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(at.Dir, "landing.conf"), cfg)
	for _, name := range LandingMapNames() {
		writeFile(t, at.LandingMap(name), nil)
	}
}

func TestLandable(t *testing.T) {
	o := landingFixtureOptions()
	if reason := Landable(mustRender(t, landableFixture(), nil), o); reason != "" {
		t.Fatalf("landable fixture: %s", reason)
	}
	checked := landableFixture()
	checked.Pools[0].HealthCheck = true
	if reason := Landable(mustRender(t, checked, nil), o); reason != "" {
		t.Fatalf("a pool that checks its members does not land: %s", reason)
	}
	for _, tc := range []struct {
		name   string
		change func(lb *model.LoadBalancer)
		want   string
	}{
		{"ipv6", func(lb *model.LoadBalancer) { lb.VIP = "fd00::10" }, "IPv6"},
		{"other port", func(lb *model.LoadBalancer) { lb.Listeners[0].Port = 8080 }, "not the landing's 80"},
		{"options", func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{ForwardedPrefix: "/x"}
		}, "options"},
		{"regex", func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies[2].Rules[1] = model.L7Rule{Type: model.RulePath, Compare: model.CompareRegex, Value: "/cart/[0-9]+"}
		}, "regular-expression"},
		{"affinity", func(lb *model.LoadBalancer) {
			lb.Pools[0].Affinity = &model.CookieAffinity{Name: "route"}
		}, "affinity"},
		{"too many members", func(lb *model.LoadBalancer) {
			for i := range 16 {
				lb.Pools[0].Members = append(lb.Pools[0].Members, member("10.0.1."+strconv.Itoa(i+1), 8080))
			}
		}, "slots"},
		{"tls", func(lb *model.LoadBalancer) {
			lb.Listeners = append(lb.Listeners, model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS, Port: 443,
				Certificates: []model.Certificate{{ID: model.ID("c1"), Hosts: []string{"shop.example"}, SHA256: "1"}}})
		}, "more than one listener"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lb := landableFixture()
			tc.change(lb)
			got := Landable(mustRender(t, lb, nil), o)
			if !strings.Contains(got, tc.want) {
				t.Fatalf("Landable = %q, want it to say %q", got, tc.want)
			}
			if _, err := PlanLanding(mustRender(t, lb, nil), landingFixtureAt, o, 1, []int{0, 1}); err == nil {
				t.Fatal("PlanLanding planned an ineligible load balancer")
			}
		})
	}
	// A path with ';' cannot go through the runtime API as a map key.
	lb := landableFixture()
	lb.Listeners[0].Policies[0].Rules[1] = pathIs("/cart;v=1")
	if got := Landable(mustRender(t, lb, nil), o); !strings.Contains(got, "';'") {
		t.Fatalf("Landable = %q for a path with ';'", got)
	}
}

func commandLines[C interface{ String() string }](cs []C) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.String()
	}
	return out
}
