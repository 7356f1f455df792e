package render

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

func headerIs(name, value string) model.L7Rule {
	return model.L7Rule{Type: model.RuleHeader, Compare: model.CompareEqualTo, Key: name, Value: value}
}

func hostSuffix(h string) model.L7Rule {
	return model.L7Rule{Type: model.RuleHostName, Compare: model.CompareSuffix, Value: h}
}

func queryIs(name, value string) model.L7Rule {
	return model.L7Rule{Type: model.RuleQuery, Compare: model.CompareEqualTo, Key: name, Value: value}
}

func methodIs(m string) model.L7Rule {
	return model.L7Rule{Type: model.RuleMethod, Compare: model.CompareEqualTo, Value: m}
}

// matchPools are the backends of matchFixture, by Service name.
var matchPoolNames = []string{"prefix-root", "api", "api-exact", "api-post", "api-h1", "api-h2", "api-q",
	"dup-first", "newer", "wild", "anyhost", "only-h", "wild-h", "cross-h", "any-get", "q-or-h", "exact-h", "exact-delete", "half", "deep"}

// matchFixture is translate's TestGatewayPrecedence as policies, in
// translate's order, plus groups without a plain policy of their own
// (fall-through to a shorter prefix, to the wildcard class, to nothing),
// Gateway wildcards (SUFFIX) of two label counts, a FIXED_RESPONSE and a
// pool with a fail share.
func matchFixture(pools map[string]model.Pool) *model.LoadBalancer {
	p := func(name string, rules ...model.L7Rule) model.L7Policy { return toPool(pools[name], rules...) }
	foo := hostIs("foo.com")
	lb := newLB([]model.Listener{httpListener("", routes(
		p("exact-h", foo, pathIs("/api"), headerIs("x-e", "1")),
		p("exact-delete", foo, pathIs("/only/e"), methodIs("DELETE")),
		p("api-exact", foo, pathIs("/api")),
		p("newer", foo, pathPrefix("/api/v2")),
		model.L7Policy{Action: model.ActionFixedResponse, StatusCode: 500, Rules: []model.L7Rule{foo, pathPrefix("/broken")}},
		p("cross-h", hostIs("a.foo.com"), pathPrefix("/cross"), headerIs("x-c", "1")),
		p("only-h", foo, pathPrefix("/only"), headerIs("X-Only", "yes please")),
		p("half", foo, pathPrefix("/half")),
		p("api-post", foo, pathPrefix("/api"), methodIs("POST")),
		p("api-h2", foo, pathPrefix("/api"), headerIs("x-a", "1"), headerIs("x-b", "2")),
		p("api-h1", foo, pathPrefix("/api"), headerIs("x-a", "1")),
		p("api-q", foo, pathPrefix("/api"), queryIs("q", "1")),
		p("api", foo, pathPrefix("/api")),
		p("dup-first", foo, pathPrefix("/dup")),
		p("prefix-root", foo, pathPrefix("/")),
		p("deep", hostSuffix("*.b.foo.com"), pathPrefix("/")),
		p("wild-h", hostSuffix("*.foo.com"), pathPrefix("/w"), headerIs("x-w", "1")),
		p("wild", hostSuffix("*.foo.com"), pathPrefix("/")),
		p("any-get", pathIs("/get"), methodIs("GET")),
		p("q-or-h", pathPrefix("/api"), queryIs("q", "2")),
		p("anyhost", pathPrefix("/api")),
	))})
	for _, name := range matchPoolNames {
		lb.Pools = append(lb.Pools, pools[name])
	}
	return lb
}

func matchPools(at func(name string) string) map[string]model.Pool {
	out := map[string]model.Pool{}
	for _, name := range matchPoolNames {
		out[name] = pool(name, memberAt(at(name)))
	}
	half := out["half"]
	half.FailWeight, half.FailTotal = 1, 2 // one of two backendRefs unresolved
	out["half"] = half
	return out
}

func TestMatchesMapped(t *testing.T) {
	lb := matchFixture(matchPools(func(string) string { return "10.0.0.1:80" }))
	v, err := newView(lb, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &v.listeners[0]
	if l.routes == nil || l.routes.match == nil {
		t.Fatal("the listener's header/query/method policies are not mapped")
	}
	if n := len(l.routes.match.shapes); n != 8 {
		t.Errorf("%d shapes, want 8 (method, x-a+x-b, x-a, x-c, x-e, x-only, x-w, q)", n)
	}
}

// A group whose policies no single order of shapes can decide keeps the
// ACL rules: tied policies of two shapes, the older testing x-b, the
// newer x-a, beside a group where the order is the other way round.
func TestMatchesUnorderableKeepsACLs(t *testing.T) {
	lb := unorderableFixture()
	v, err := newView(lb, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.listeners[0].routes != nil {
		t.Fatal("mapped although no order of shapes is right for both groups")
	}
	cfg := mustRender(t, lb, nil).Fragment
	if !strings.Contains(string(cfg), "req.fhdr(x-b),sha1,hex -m str 356A192B7913B04C54574D18C28D46E6395428AB") {
		t.Errorf("no header ACL:\n%s", cfg)
	}
}

func TestBeforeExtended(t *testing.T) {
	r := func(rules ...model.L7Rule) route {
		rt, ok := routeOf(&model.L7Policy{Rules: rules})
		if !ok {
			t.Fatalf("not a route: %+v", rules)
		}
		return rt
	}
	for _, tc := range []struct {
		a, b route
		want int
	}{
		{r(pathPrefix("/api"), methodIs("GET")), r(pathPrefix("/api"), headerIs("x-a", "1"), headerIs("x-b", "1")), -1},
		{r(pathPrefix("/api"), headerIs("x-a", "1"), headerIs("x-b", "1")), r(pathPrefix("/api"), headerIs("x-a", "1"), queryIs("q", "1")), -1},
		{r(pathPrefix("/api"), headerIs("x-a", "1")), r(pathPrefix("/api"), queryIs("q", "1"), queryIs("r", "1")), -1},
		{r(pathPrefix("/api"), queryIs("q", "1")), r(pathPrefix("/api")), -1},
		{r(pathPrefix("/api")), r(pathPrefix("/ap"), methodIs("GET")), -1},
		{r(pathIs("/x")), r(pathPrefix("/api/v2"), methodIs("GET")), -1},
		{r(pathPrefix("/a")), r(pathPrefix("/b")), 0},
		{r(hostSuffix("*.b.foo.com"), pathPrefix("/")), r(hostSuffix("*.foo.com"), pathIs("/x/y")), -1},
		{r(hostWild("*.foo.com"), pathPrefix("/")), r(hostSuffix("*.b.foo.com"), pathPrefix("/")), -1},
		{r(hostSuffix("*.foo.com"), pathPrefix("/")), r(pathIs("/x")), -1},
		{r(pathIs("/api"), headerIs("x-e", "1")), r(pathIs("/only/e"), methodIs("DELETE")), 0},
		{r(hostIs("a.com"), pathIs("/x"), headerIs("x-e", "1")), r(hostIs("b.com"), pathIs("/x"), methodIs("DELETE")), 0},
	} {
		if got := before(tc.a, tc.b); got != tc.want {
			t.Errorf("before(%+v, %+v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func unorderableFixture() *model.LoadBalancer {
	pools := matchPools(func(string) string { return "10.244.3.1:8080" })
	foo := hostIs("foo.com")
	return newLB([]model.Listener{httpListener("", routes(
		toPool(pools["api"], foo, pathPrefix("/a"), headerIs("x-b", "1")),
		toPool(pools["api-h1"], foo, pathPrefix("/a"), headerIs("x-a", "1")),
		toPool(pools["api"], foo, pathPrefix("/b"), headerIs("x-a", "1")),
		toPool(pools["api-h1"], foo, pathPrefix("/b"), headerIs("x-b", "1")),
		toPool(pools["api-post"], foo, pathPrefix("/b"), methodIs("POST"), queryIs("id", "a:b/c")),
		model.L7Policy{Action: model.ActionFixedResponse, StatusCode: 500, Rules: []model.L7Rule{foo, pathPrefix("/b"), methodIs("PUT")}},
		toPool(pools["wild"], hostSuffix("*.foo.com"), pathPrefix("/")),
	))}, pools["api"], pools["api-h1"], pools["api-post"], pools["wild"])
}

// A header value as long as the Gateway API allows (4 KiB) renders on
// both paths: hashed, it never makes a line longer than MaxLineBytes.
func TestMatchesLongHeaderValue(t *testing.T) {
	long := strings.Repeat("v", 4000)
	acl := unorderableFixture()
	acl.Listeners[0].Policies[0].Rules[2].Value = long
	mapped := matchFixture(matchPools(func(string) string { return "10.0.0.1:80" }))
	for _, p := range mapped.Listeners[0].Policies {
		for i, r := range p.Rules {
			if r.Type == model.RuleHeader && r.Key == "X-Only" {
				p.Rules[i].Value = long
			}
		}
	}
	for _, lb := range []*model.LoadBalancer{acl, mapped} {
		r := mustRender(t, lb, nil)
		if strings.Contains(string(r.Fragment), long) {
			t.Error("the header value reached the configuration")
		}
	}
}

// The frontend's rules do not grow with routes: 10 or 1,000 paths of
// 3 hosts, each with a header match and a method match, render the same
// number of lines; only the maps grow.
func TestMatchesRulesIndependentOfRoutes(t *testing.T) {
	lines := func(n int) int {
		api := pool("api", member("10.0.0.1", 80))
		var ps []model.L7Policy
		for i := range n {
			for _, h := range []string{"a.example", "b.example", "c.example"} {
				path := pathPrefix("/p" + strconv.Itoa(i))
				ps = append(ps, toPool(api, hostIs(h), path, methodIs("PUT")),
					toPool(api, hostIs(h), path, headerIs("x-tenant", "t"+strconv.Itoa(i))), toPool(api, hostIs(h), path))
			}
		}
		// translate's order: longer prefixes first.
		slices.SortStableFunc(ps, func(a, b model.L7Policy) int { return cmp.Compare(len(b.Rules[1].Value), len(a.Rules[1].Value)) })
		r := mustRender(t, newLB([]model.Listener{httpListener("", routes(ps...))}, api), nil)
		frontend := strings.Split(string(r.Fragment), "\nbackend ")[0]
		if strings.Contains(frontend, "acl p_") {
			t.Fatalf("%d routes: not mapped", n)
		}
		return strings.Count(frontend, "\n")
	}
	if small, large := lines(10), lines(1000); small != large {
		t.Errorf("frontend lines: %d for 10 paths, %d for 1,000", small, large)
	}
}
