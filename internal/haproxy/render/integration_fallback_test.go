package render

import (
	"net"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// fallbackFixture: default-backend on two routes, one whose pool has no
// member and one whose pool serves, beside a route without it.
// more are extra pools, each with default-backend on host
// <service>.test.
func fallbackFixture(empty, live, errs model.Pool, more ...model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	fb := func(route model.Pool) model.PolicyOptions {
		return model.PolicyOptions{DefaultBackend: &model.DefaultBackend{PoolID: errs.ID, RoutePoolID: route.ID}}
	}
	ps := []model.L7Policy{
		with(toPool(empty, hostIs("app.test"), pathPrefix("/")), fb(empty)),
		with(toPool(live, hostIs("live.test"), pathPrefix("/")), fb(live)),
		toPool(empty, hostIs("other.test"), pathPrefix("/")),
	}
	for _, m := range more {
		ps = append(ps, with(toPool(m, hostIs(m.Service+".test"), pathPrefix("/")), fb(m)))
	}
	return newLB([]model.Listener{httpListener("", routes(ps...))}, append([]model.Pool{empty, live, errs}, more...)...)
}

func TestFallbackRevalidated(t *testing.T) {
	a, b := pool("a", member("10.0.0.1", 80)), pool("b", member("10.0.0.2", 80))
	for name, d := range map[string]model.DefaultBackend{
		"missing pool":       {PoolID: model.ID("nope"), RoutePoolID: a.ID},
		"missing route pool": {PoolID: b.ID, RoutePoolID: model.ID("nope")},
		"itself":             {PoolID: a.ID, RoutePoolID: a.ID},
		"evil":               {PoolID: b.ID + ";evil", RoutePoolID: a.ID},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(a, hostIs("a.example"), pathPrefix("/"))))}, a, b)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{DefaultBackend: &d}
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestIntegrationFallback runs default-backend through a real HAProxy:
// a route whose Service has no member is answered by the default
// backend, a route whose Service serves is not, another Ingress's route
// to the same empty Service still gets 503, and a route whose only
// member fails its health check moves to the default backend once
// HAProxy marks it down. The same with ACL rules instead of maps (a
// host-less policy for another path first, an order a map lookup cannot
// keep).
func TestIntegrationFallback(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	for _, acl := range []bool{false, true} {
		t.Run(map[bool]string{false: "maps", true: "acl"}[acl], func(t *testing.T) { testFallback(t, bin, acl) })
	}
}

func testFallback(t *testing.T, bin string, acl bool) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there: connections are refused
	empty := pool("empty")
	live := pool("live", memberAt(startBackend(t, "live")))
	errs := pool("errors", memberAt(startBackend(t, "errors")))
	down := pool("down", memberAt(deadAddr))
	lb := fallbackFixture(empty, live, errs, down)
	if acl {
		lb.Listeners[0].Policies = routes(append([]model.L7Policy{toPool(live, pathPrefix("/elsewhere"))},
			lb.Listeners[0].Policies...)...)
		if cfg, err := Config(lb, fixtureOptions()); err != nil || strings.Contains(string(cfg), "map_") {
			t.Fatalf("ACL mode: %v, or the config still looks routes up in maps", err)
		}
	}
	addr := serveLB(t, bin, lb)
	get := func(host string) (int, string) {
		resp := rawRequest(t, addr, "127.0.0.1", "GET /x?y=1 HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		return resp.StatusCode, resp.Header.Get("X-Backend")
	}
	for _, tc := range []struct {
		host, backend string
		code          int
	}{
		{"app.test", "errors", 200},
		{"live.test", "live", 200},
		{"other.test", "", 503},
	} {
		for i := 0; i < 5; i++ {
			if code, be := get(tc.host); code != tc.code || be != tc.backend {
				t.Fatalf("%s: %d from %q, want %d from %q", tc.host, code, be, tc.code, tc.backend)
			}
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, be := get("down.test")
		if code == 200 && be == "errors" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("down.test: still %d from %q after its member failed its checks", code, be)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
