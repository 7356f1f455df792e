package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// What render refuses around ssl-passthrough: bytes must never reach an
// HTTP backend nor HTTP a TCP one, and a host must be a host.
func TestPassthroughRefused(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	for name, edit := range map[string]func(lb *model.LoadBalancer){
		"to an HTTP pool": func(lb *model.LoadBalancer) { lb.Listeners[1].Passthrough[0].PoolID = web1.ID },
		"HTTP to a TCP pool": func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies = routes(toPool(lb.Pools[1], hostIs("web.example"), pathPrefix("/")))
		},
		"default pool TCP":     func(lb *model.LoadBalancer) { lb.Listeners[0].DefaultPoolID = lb.Pools[1].ID },
		"on an HTTP listener":  func(lb *model.LoadBalancer) { lb.Listeners[0].Passthrough = lb.Listeners[1].Passthrough },
		"host injection":       func(lb *model.LoadBalancer) { lb.Listeners[1].Passthrough[0].Host = "pt.example be_x" },
		"bad wildcard host":    func(lb *model.LoadBalancer) { lb.Listeners[1].Passthrough[0].Host = "*.*.example" },
		"terminated to a pool": func(lb *model.LoadBalancer) { lb.Listeners[1].Passthrough[0].Terminate = true },
		"terminated without certificates": func(lb *model.LoadBalancer) {
			lb.Listeners[1].Certificates, lb.Listeners[1].Policies = nil, nil
			lb.Listeners[1].Passthrough[1] = model.PassthroughRoute{Host: "t.example", Terminate: true}
		},
		"host twice": func(lb *model.LoadBalancer) { lb.Listeners[1].Passthrough[1].Host = "pt.example" },
		"routes without certificates": func(lb *model.LoadBalancer) {
			lb.Listeners[1].Certificates, lb.Listeners[1].Policies = nil, routes(toPool(web1, hostIs("web.example"), pathPrefix("/")))
		},
		"TCP pool with a protocol": func(lb *model.LoadBalancer) { lb.Pools[1].Protocol = model.BackendHTTPS },
	} {
		lb := passthroughFixture(web1, web2, true)
		edit(lb)
		_, err := Render(lb, lbAt(fixtureDir), nil, Options{Dir: fixtureDir})
		if err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// A passthrough host added or removed reloads, with the reason.
func TestPlanPassthroughReloads(t *testing.T) {
	web1 := pool("webservice-1", member("10.47.255.238", 80))
	web2 := pool("webservice-2", member("10.47.255.236", 80))
	old := passthroughFixture(web1, web2, true)
	next := old.Clone()
	next.Listeners[1].Passthrough = next.Listeners[1].Passthrough[:1]
	if p := mustPlan(t, old, next); !p.Reload || !strings.Contains(p.Reason, "passthrough hosts changed") {
		t.Errorf("plan %+v", p)
	}
}
