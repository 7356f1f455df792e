package render

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// splitFixture: what an HTTPRoute rule whose backendRefs carry
// RequestHeaderModifiers becomes: a pool per ref with its header
// changes, and a policy splitting between them (3:1, and 2 answered
// 500), beside a policy on a plain pool.
func splitFixture(web1, web2 model.Pool) *model.LoadBalancer {
	a, b := web1, web2
	a.ID, a.RequestHeaders = "ref-a", []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-R"}, {Op: model.HeaderSet, Name: "Backend", Value: "v1"}}
	b.ID, b.RequestHeaders = "ref-b", []model.HeaderOp{{Op: model.HeaderAdd, Name: "Backend", Value: "v2; x"}}
	split := toPool(a, hostIs("split.example"), pathPrefix("/"))
	split.Options = &model.PolicyOptions{Split: &model.Split{
		Pools: []model.PoolShare{{PoolID: a.ID, Weight: 3}, {PoolID: b.ID, Weight: 1}}, FailWeight: 2}}
	return newLB([]model.Listener{httpListener("", routes(
		split,
		toPool(web1, hostIs("plain.example"), pathPrefix("/")),
	))}, web1, a, b)
}

// A split or pool header change that translation would not make is
// refused, not rendered.
func TestSplitRevalidated(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	for name, s := range map[string]*model.Split{
		"no pools":         {},
		"missing pool":     {Pools: []model.PoolShare{{PoolID: "nope", Weight: 1}}},
		"weight 0":         {Pools: []model.PoolShare{{PoolID: web.ID, Weight: 0}}},
		"weight too large": {Pools: []model.PoolShare{{PoolID: web.ID, Weight: maxSplitWeight + 1}}},
		"negative fail":    {Pools: []model.PoolShare{{PoolID: web.ID, Weight: 1}}, FailWeight: -1},
		"too many":         {Pools: make([]model.PoolShare, maxSplitPools+1)},
	} {
		p := toPool(web, hostIs("a.example"), pathPrefix("/"))
		p.Options = &model.PolicyOptions{Split: s}
		lb := newLB([]model.Listener{httpListener("", routes(p))}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("split %s rendered", name)
		}
	}
	for name, ops := range map[string][]model.HeaderOp{
		"value CRLF":   {{Op: model.HeaderSet, Name: "X-A", Value: "v\r\nX-Evil: y"}},
		"name ;evil":   {{Op: model.HeaderSet, Name: "X-A;evil", Value: "v"}},
		"framing":      {{Op: model.HeaderRemove, Name: "Content-Length"}},
		"unknown op":   {{Op: "replace", Name: "X-A", Value: "v"}},
		"remove value": {{Op: model.HeaderRemove, Name: "X-A", Value: "v"}},
	} {
		bad := web
		bad.RequestHeaders = ops
		lb := newLB([]model.Listener{httpListener(bad.ID, nil)}, bad)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("pool headers %s rendered", name)
		}
	}
	tcp := web
	tcp.TCP, tcp.RequestHeaders = true, []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-A"}}
	if _, err := Render(newLB([]model.Listener{httpListener(tcp.ID, nil)}, tcp), lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
		t.Error("a TCP pool with header changes rendered")
	}
}

// TestIntegrationSplit: a split of two pools with their own header
// changes through a real HAProxy: each request reaches one pool and
// carries that pool's header (the suite's
// HTTPRouteRequestHeaderModifierBackendWeights), both pools get some,
// the fail share is answered 500, and a plain policy on the same
// backend as the first share sees no header change.
func TestIntegrationSplit(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	one := pool("one", memberAt(startFilterBackend(t, "one")))
	two := pool("two", memberAt(startFilterBackend(t, "two")))
	a, b := one, two
	a.ID, a.RequestHeaders = "ref-a", []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-R"}, {Op: model.HeaderSet, Name: "Backend", Value: "one"}}
	b.ID, b.RequestHeaders = "ref-b", []model.HeaderOp{{Op: model.HeaderSet, Name: "Backend", Value: "two"}}
	split := toPool(a, hostIs("split.test"), pathPrefix("/"))
	split.Options = &model.PolicyOptions{
		RequestHeaders: []model.HeaderOp{{Op: model.HeaderSet, Name: "Backend", Value: "policy"}, {Op: model.HeaderSet, Name: "X-Policy", Value: "p"}},
		Split:          &model.Split{Pools: []model.PoolShare{{PoolID: a.ID, Weight: 2}, {PoolID: b.ID, Weight: 2}}, FailWeight: 1}}
	fail := toPool(a, hostIs("fail.test"), pathPrefix("/"))
	fail.Options = &model.PolicyOptions{Split: &model.Split{Pools: []model.PoolShare{{PoolID: a.ID, Weight: 1}}}}
	lb := newLB([]model.Listener{httpListener("", routes(split, fail, toPool(one, hostIs("plain.test"), pathPrefix("/"))))}, one, a, b)
	addr := serveLB(t, bin, lb)
	counts := map[string]int{}
	for range 200 {
		resp := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: split.test\r\nX-R: r\r\n\r\n")
		if resp.StatusCode == 500 {
			counts["500"]++
			continue
		}
		name := resp.Header.Get("X-Backend")
		counts[name]++
		if resp.StatusCode != 200 || resp.Header.Get("X-Req-Backend") != name || resp.Header.Get("X-Req-X-Policy") != "p" ||
			(name == "one" && resp.Header.Get("X-Req-X-R") != "") || (name == "two" && resp.Header.Get("X-Req-X-R") != "r") {
			t.Fatalf("split: %d from %q with %v", resp.StatusCode, name, resp.Header)
		}
	}
	// 200 draws of 2:2:1: each share well inside its expected range.
	if counts["one"] < 50 || counts["two"] < 50 || counts["500"] < 15 || counts["one"]+counts["two"]+counts["500"] != 200 {
		t.Errorf("split counts %v, want about 80:80:40", counts)
	}
	for range 10 {
		if resp := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: fail.test\r\n\r\n"); resp.StatusCode != 200 || resp.Header.Get("X-Req-Backend") != "one" {
			t.Fatalf("one-pool split: %d %v", resp.StatusCode, resp.Header)
		}
	}
	plain := rawRequest(t, addr, "127.0.0.1", "GET / HTTP/1.1\r\nHost: plain.test\r\nX-R: r\r\n\r\n")
	if plain.StatusCode != 200 || plain.Header.Get("X-Backend") != "one" || plain.Header.Get("X-Req-Backend") != "" || plain.Header.Get("X-Req-X-R") != "r" {
		t.Errorf("plain: %d %v", plain.StatusCode, plain.Header)
	}
}
