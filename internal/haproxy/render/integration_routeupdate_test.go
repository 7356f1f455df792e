package render

import (
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// TestIntegrationRouteUpdate: routes that change without a reload. A
// real HAProxy runs a load balancer; the next version adds a host, adds a
// longer prefix to an existing host (after the shorter one in the map:
// map_beg must still take the longest), removes a host and re-points a
// catch-all, all to pools that exist. PlanUpdate gives map commands, sent
// to the runtime socket, and the process then routes as the new version
// says, twice in a row (the second update names the maps the process
// loaded, not the new files).
func TestIntegrationRouteUpdate(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	web := pool("web", memberAt(startBackend(t, "web")))
	api := pool("api", memberAt(startBackend(t, "api")))
	admin := pool("admin", memberAt(startBackend(t, "admin")))
	port := freePort()
	// Every version has an Exact path: a new Exact path is then an entry
	// of a lookup the frontend already has (the first one adds the
	// lookup to the frontend, a reload).
	status := toPool(web, hostIs("a.example"), pathIs("/status"))
	version := func(ps ...model.L7Policy) *model.LoadBalancer {
		lb := newLB([]model.Listener{httpListener("", routes(append([]model.L7Policy{status}, ps...)...))}, web, api, admin)
		lb.Listeners[0].Port, lb.VIP, lb.FIP = port, "127.0.0.1", ""
		return lb
	}
	v1 := version(
		toPool(api, hostIs("b.example"), pathPrefix("/v1")),
		toPool(admin, hostIs("c.example"), pathPrefix("/x")),
		toPool(web, hostIs("a.example")),
	)
	v2 := version(
		toPool(admin, hostIs("b.example"), pathPrefix("/v1/admin")),
		toPool(api, hostIs("b.example"), pathPrefix("/v1")),
		toPool(api, hostIs("d.example"), pathPrefix("/v1")),
		toPool(admin, hostIs("a.example")),
	)
	v3 := version( // translate's order: Exact paths first
		toPool(web, hostIs("e.example"), pathIs("/health")),
		toPool(admin, hostIs("b.example"), pathPrefix("/v1/admin")),
		toPool(admin, hostIs("a.example")),
	)

	dir := t.TempDir()
	at := layout.LB{UUID: v1.UUID, Dir: dir}
	opts := Options{Dir: dir, MinSlots: 4}
	cfg, err := Config(v1, opts)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]*Result, 3)
	for i, lb := range []*model.LoadBalancer{v1, v2, v3} {
		var prev Slots
		if i > 0 {
			prev = results[i-1].Slots
		}
		if results[i], err = Render(lb, at, prev, opts); err != nil {
			t.Fatal(err)
		}
		for _, m := range results[i].Maps {
			writeFile(t, m.Path, m.Data)
		}
	}
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", port)
	c := &client{t: t, http: "127.0.0.1:" + strconv.Itoa(port)}
	check := func(stage string, want map[[2]string]string) {
		t.Helper()
		for req, backend := range want {
			resp := c.get("http", req[0], req[1])
			got := resp.Header.Get("X-Backend")
			if backend == "404" {
				if resp.StatusCode != 404 {
					t.Errorf("%s: %s%s: %d from %q, want 404", stage, req[0], req[1], resp.StatusCode, got)
				}
			} else if resp.StatusCode != 200 || got != backend {
				t.Errorf("%s: %s%s: %d from %q, want %s", stage, req[0], req[1], resp.StatusCode, got, backend)
			}
		}
	}
	check("v1", map[[2]string]string{
		{"b.example", "/v1/admin/x"}: "api", {"b.example", "/v1"}: "api", {"c.example", "/x/y"}: "admin",
		{"a.example", "/"}: "web", {"d.example", "/v1"}: "404",
	})
	apply := func(from, to *Result) {
		t.Helper()
		plan, err := PlanUpdate(from, to)
		if err != nil || plan.Reload || !plan.Routes || len(plan.Commands) == 0 {
			t.Fatalf("plan: %+v %v", plan, err)
		}
		for _, cmd := range plan.Commands {
			runtimeCommand(t, procAt(dir).Socket(), cmd.String())
		}
		to.RunsWith(plan)
	}
	apply(results[0], results[1])
	check("v2", map[[2]string]string{
		{"b.example", "/v1/admin/x"}: "admin", {"b.example", "/v1/adminx"}: "api", {"b.example", "/v1"}: "api",
		{"d.example", "/v1/z"}: "api", {"c.example", "/x/y"}: "404", {"a.example", "/"}: "admin",
	})
	apply(results[1], results[2])
	check("v3", map[[2]string]string{
		{"b.example", "/v1/admin/x"}: "admin", {"b.example", "/v1"}: "404", {"d.example", "/v1/z"}: "404",
		{"e.example", "/health"}: "web", {"e.example", "/health/x"}: "404", {"a.example", "/"}: "admin",
	})
}

// TestIntegrationSparePools: a shared load balancer (an Ingress group)
// gets routes to Services it did not have. Each new pool of the common
// shape takes a spare backend through the runtime API, members and
// routes, and serves at once; a member change of such a pool reaches the
// spare; with the spares taken, or for a pool of another shape, the plan
// is a reload.
func TestIntegrationSparePools(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	web := pool("web", memberAt(startBackend(t, "web")))
	api := pool("api", memberAt(startBackend(t, "api")))
	img := pool("img", memberAt(startBackend(t, "img")))
	port := freePort()
	version := func(pools []model.Pool, ps ...model.L7Policy) *model.LoadBalancer {
		lb := newLB([]model.Listener{httpListener("", routes(ps...))}, pools...)
		lb.Name = "group:shop"
		lb.Listeners[0].Port, lb.VIP, lb.FIP = port, "127.0.0.1", ""
		return lb
	}
	dir := t.TempDir()
	at := layout.LB{UUID: fixtureUUID, Dir: dir}
	opts := Options{Dir: dir, MinSlots: 4}
	render := func(lb *model.LoadBalancer, prev *Result) *Result {
		t.Helper()
		var slots Slots
		if prev != nil {
			slots = prev.Slots
		}
		r, err := Render(lb, at, slots, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range r.Maps {
			writeFile(t, m.Path, m.Data)
		}
		return r
	}
	v1 := version([]model.Pool{web}, toPool(web, hostIs("a.example")))
	cfg, err := Config(v1, opts)
	if err != nil {
		t.Fatal(err)
	}
	r1 := render(v1, nil)
	writeFile(t, dir+"/haproxy.conf", cfg)
	startHAProxy(t, bin, dir+"/haproxy.conf", port)
	c := &client{t: t, http: "127.0.0.1:" + strconv.Itoa(port)}
	serves := func(host, backend string) {
		t.Helper()
		resp := c.get("http", host, "/")
		if got := resp.Header.Get("X-Backend"); resp.StatusCode != 200 || got != backend {
			t.Errorf("%s: %d from %q, want %s", host, resp.StatusCode, got, backend)
		}
	}
	apply := func(from, to *Result) Plan {
		t.Helper()
		plan, err := PlanUpdate(from, to)
		if err != nil {
			t.Fatal(err)
		}
		if !plan.Reload {
			for _, cmd := range plan.Commands {
				runtimeCommand(t, procAt(dir).Socket(), cmd.String())
			}
			to.RunsWith(plan)
		}
		return plan
	}
	serves("a.example", "web")

	// api joins: a spare.
	v2 := version([]model.Pool{web, api}, toPool(api, hostIs("b.example")), toPool(web, hostIs("a.example")))
	r2 := render(v2, r1)
	if p := apply(r1, r2); p.Reload || !p.Routes {
		t.Fatalf("a new pool in a group: %+v, want it in a spare", p)
	}
	serves("b.example", "api")
	serves("a.example", "web")

	// api gets a second member: the spare's slots.
	api2 := api
	api2.Members = append(append([]model.Member(nil), api.Members...), memberAt(startBackend(t, "api-2")))
	v3 := version([]model.Pool{web, api2}, toPool(api2, hostIs("b.example")), toPool(web, hostIs("a.example")))
	r3 := render(v3, r2)
	if p := apply(r2, r3); p.Reload || p.Routes {
		t.Fatalf("a member of a pool in a spare: %+v, want member commands", p)
	}
	seen := map[string]bool{}
	for range 12 {
		seen[c.get("http", "b.example", "/").Header.Get("X-Backend")] = true
	}
	if !seen["api"] || !seen["api-2"] {
		t.Errorf("b.example served by %v, want api and api-2", seen)
	}

	// img joins: the second spare.
	v4 := version([]model.Pool{web, api2, img}, toPool(api2, hostIs("b.example")), toPool(img, hostIs("c.example")), toPool(web, hostIs("a.example")))
	r4 := render(v4, r3)
	if p := apply(r3, r4); p.Reload {
		t.Fatalf("a second new pool: %+v, want the second spare", p)
	}
	serves("c.example", "img")
	serves("b.example", "api") // or api-2; either is the api pool
	serves("a.example", "web")

	// No spare left; and a pool of another shape never fits.
	more := pool("more", memberAt(startBackend(t, "more")))
	v5 := version([]model.Pool{web, api2, img, more}, toPool(api2, hostIs("b.example")), toPool(img, hostIs("c.example")),
		toPool(more, hostIs("d.example")), toPool(web, hostIs("a.example")))
	if p := apply(r4, render(v5, r4)); !p.Reload || !strings.Contains(p.Reason, "no spare pool left") {
		t.Errorf("a third new pool: %+v, want a reload (no spare left)", p)
	}
	odd := more
	odd.HealthCheck = false
	v6 := version([]model.Pool{web, odd}, toPool(odd, hostIs("d.example")), toPool(web, hostIs("a.example")))
	if p := apply(r1, render(v6, r1)); !p.Reload {
		t.Errorf("a pool without health checks: %+v, want a reload", p)
	}
}
