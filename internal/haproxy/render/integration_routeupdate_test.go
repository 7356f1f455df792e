package render

import (
	"strconv"
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
