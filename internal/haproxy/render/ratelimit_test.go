package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// rateLimitFixture: each limit alone, all three together, and a route of
// the same host without limits.
func rateLimitFixture(web1, web2 model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(web1, hostIs("app.example"), pathPrefix("/api")), model.PolicyOptions{RateLimit: &model.RateLimit{RequestsPerSecond: 10}}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/login")), model.PolicyOptions{RateLimit: &model.RateLimit{RequestsPerMinute: 30}}),
		with(toPool(web1, hostIs("app.example"), pathPrefix("/download")), model.PolicyOptions{RateLimit: &model.RateLimit{Connections: 2}}),
		with(toPool(web2, hostIs("app.example"), pathPrefix("/all")),
			model.PolicyOptions{RateLimit: &model.RateLimit{RequestsPerSecond: 5, RequestsPerMinute: 100, Connections: 3}}),
		toPool(web2, hostIs("app.example"), pathPrefix("/")),
	))}, web1, web2)
}

func TestRateLimitRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	for name, rl := range map[string]model.RateLimit{
		"negative rps":  {RequestsPerSecond: -1},
		"huge rpm":      {RequestsPerMinute: maxRateLimit + 1},
		"negative conn": {Connections: -5},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(web, hostIs("a.example"), pathPrefix("/"))))}, web)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{RateLimit: &rl}
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
	// All zero: no profile, the route renders as without options.
	lb := newLB([]model.Listener{httpListener("", routes(toPool(web, hostIs("a.example"), pathPrefix("/"))))}, web)
	plain, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions())
	if err != nil {
		t.Fatal(err)
	}
	lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{RateLimit: &model.RateLimit{}}
	zero, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions())
	if err != nil || string(zero.Fragment) != string(plain.Fragment) {
		t.Errorf("zero limits render otherwise than none: %v", err)
	}
}
