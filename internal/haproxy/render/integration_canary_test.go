package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// canaryFixture: a route with a canary by header, cookie and weight, one
// with a canary by header value only, and a route of another host to the
// same main pool without a canary.
func canaryFixture(main, canary model.Pool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	src := model.Source{Kind: "Ingress", Namespace: "ns", Name: "app-canary"}
	return newLB([]model.Listener{httpListener("", routes(
		with(toPool(main, hostIs("app.test"), pathPrefix("/")), model.PolicyOptions{Canary: &model.Canary{
			PoolID: canary.ID, Weight: 50, WeightTotal: 100, Header: "X-Canary", Cookie: "canary", Source: src}}),
		with(toPool(main, hostIs("beta.test"), pathPrefix("/")), model.PolicyOptions{Canary: &model.Canary{
			PoolID: canary.ID, WeightTotal: 100, Header: "X-Version", HeaderValue: "v2 beta", Source: src}}),
		with(toPool(main, hostIs("pattern.test"), pathPrefix("/")), model.PolicyOptions{Canary: &model.Canary{
			PoolID: canary.ID, WeightTotal: 100, Header: "X-Version", HeaderPattern: "^v[23]$|^beta", Source: src}}),
		toPool(main, hostIs("other.test"), pathPrefix("/")),
	))}, main, canary)
}

func TestCanaryRevalidated(t *testing.T) {
	main, canary := pool("main", member("10.0.0.1", 80)), pool("canary", member("10.0.0.2", 80))
	for name, c := range map[string]model.Canary{
		"missing pool":   {PoolID: model.ID("nope"), WeightTotal: 100},
		"weight > total": {PoolID: canary.ID, Weight: 101, WeightTotal: 100},
		"zero total":     {PoolID: canary.ID, WeightTotal: 0},
		"header evil":    {PoolID: canary.ID, WeightTotal: 100, Header: "X;evil"},
		"header paren":   {PoolID: canary.ID, WeightTotal: 100, Header: "X)"},
		"value quote":    {PoolID: canary.ID, WeightTotal: 100, Header: "X", HeaderValue: "a'b"},
		"value alone":    {PoolID: canary.ID, WeightTotal: 100, HeaderValue: "a"},
		"cookie evil":    {PoolID: canary.ID, WeightTotal: 100, Cookie: "c;evil"},
		"pattern alone":  {PoolID: canary.ID, WeightTotal: 100, HeaderPattern: "^v2$"},
		"pattern+value":  {PoolID: canary.ID, WeightTotal: 100, Header: "X", HeaderValue: "a", HeaderPattern: "^v2$"},
		"pattern flags":  {PoolID: canary.ID, WeightTotal: 100, Header: "X", HeaderPattern: "(?i)v2"},
		"pattern nested": {PoolID: canary.ID, WeightTotal: 100, Header: "X", HeaderPattern: "(a+)+$"},
		"pattern space":  {PoolID: canary.ID, WeightTotal: 100, Header: "X", HeaderPattern: "a b"},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(main, hostIs("a.example"), pathPrefix("/"))))}, main, canary)
		lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{Canary: &c}
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestIntegrationCanary runs a canary through a real HAProxy: weight 50
// of 100 sends 500 ± 50 of 1,000 requests to the canary; the header
// "always" / "never" and the cookie "always" / "never" decide alone (the
// header first); a header value other than the configured one falls
// back to the weight (0 here: the main pool), as does a value the header
// pattern (^v[23]$|^beta, case-sensitive) does not match; another
// host's route to the same pool never reaches the canary.
func TestIntegrationCanary(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	main := pool("main", memberAt(startBackend(t, "main")))
	canary := pool("canary", memberAt(startBackend(t, "canary")))
	addr := serveLB(t, bin, canaryFixture(main, canary))
	count := func(host, headers string, n int) int {
		hits := 0
		for i := 0; i < n; i++ {
			resp := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: "+host+"\r\n"+headers+"\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("%s %q: %d", host, headers, resp.StatusCode)
			}
			if resp.Header.Get("X-Backend") == "canary" {
				hits++
			}
		}
		return hits
	}
	got := count("app.test", "", 1000)
	t.Logf("weight 50/100: %d of 1000 requests reached the canary", got)
	if got < 450 || got > 550 {
		t.Errorf("weight 50/100: %d of 1000 to the canary, want 450-550", got)
	}
	for _, tc := range []struct {
		host, headers string
		want          int // of 20
	}{
		{"app.test", "X-Canary: always\r\n", 20},
		{"app.test", "X-Canary: never\r\n", 0},
		{"app.test", "Cookie: canary=always\r\n", 20},
		{"app.test", "Cookie: canary=never\r\n", 0},
		{"app.test", "X-Canary: never\r\nCookie: canary=always\r\n", 0},
		{"app.test", "X-Canary: always\r\nCookie: canary=never\r\n", 20},
		{"beta.test", "X-Version: v2 beta\r\n", 20},
		{"beta.test", "X-Version: v1\r\n", 0},
		{"beta.test", "X-Version: always\r\n", 0},
		{"beta.test", "", 0},
		{"pattern.test", "X-Version: v2\r\n", 20},
		{"pattern.test", "X-Version: v3\r\n", 20},
		{"pattern.test", "X-Version: beta-7\r\n", 20},
		{"pattern.test", "X-Version: v23\r\n", 0},
		{"pattern.test", "X-Version: V2\r\n", 0},
		{"pattern.test", "X-Version: always\r\n", 0},
		{"pattern.test", "", 0},
		{"other.test", "X-Canary: always\r\nCookie: canary=always\r\n", 0},
	} {
		if got := count(tc.host, tc.headers, 20); got != tc.want {
			t.Errorf("%s %q: %d of 20 to the canary, want %d", tc.host, tc.headers, got, tc.want)
		}
	}
}
