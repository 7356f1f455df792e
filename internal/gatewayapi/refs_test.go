package gatewayapi

import (
	"bytes"
	"reflect"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// refsResult is filterResult with a second Service, svc2.
func refsResult(t *testing.T, rules string) *translate.Result {
	t.Helper()
	docs := filterGateway + refusalVictim + "---\nkind: HTTPRoute\nmetadata: {name: r}\nspec:\n  parentRefs: [{name: gw}]\n" +
		"  hostnames: [app.example]\n  rules: " + rules + "\n"
	snap := gatewaySnap(t, docs)
	withServices(snap, "default", "svc", "svc2")
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "default", "tls", "app.example"))
	return Translate(snap, gatewayOpts())
}

func lbPools(lb *model.LoadBalancer) map[string]*model.Pool {
	out := map[string]*model.Pool{}
	for i := range lb.Pools {
		out[lb.Pools[i].ID] = &lb.Pools[i]
	}
	return out
}

// A backendRef's RequestHeaderModifier: one ref gets a pool of its own
// with the changes (the Service's pool, which the victim route and the
// plain rule share, keeps none); several refs get a split of pools, one
// each, weighted as the refs, the policy's own pool the first.
func TestGatewayBackendRefFilters(t *testing.T) {
	res := refsResult(t, `
  - matches: [{path: {value: /plain}}]
    backendRefs: [{name: svc, port: 80}]
  - matches: [{path: {value: /one}}]
    backendRefs:
    - name: svc
      port: 80
      filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: v1}], remove: [X-R]}}]
  - matches: [{path: {value: /split}}]
    backendRefs:
    - {name: svc, port: 80, weight: 3, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: v1}]}}]}
    - {name: svc2, port: 80, weight: 1}
    - {name: missing, port: 80, weight: 2}
  - matches: [{path: {value: /timed}}]
    timeouts: {request: 2s}
    filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: X-Rule, value: r}]}}]
    backendRefs:
    - {name: svc, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: a}]}}]}
    - {name: svc2, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: b}]}}]}`)
	lb := res.LoadBalancers[0]
	pools := lbPools(lb)
	byPath := routePools(t, res)
	opts := routeOptions(t, res, 80)
	svcPool := model.ID("pool", "default", "svc", "80")
	if p := byPath["/plain"]; p == nil || p.ID != svcPool || p.RequestHeaders != nil {
		t.Errorf("/plain: %+v, want the Service's pool", p)
	}
	one := byPath["/one"]
	wantOps := []model.HeaderOp{{Op: model.HeaderRemove, Name: "X-R"}, {Op: model.HeaderSet, Name: "Backend", Value: "v1"}}
	if one == nil || one.ID == svcPool || one.Service != "svc" || !reflect.DeepEqual(one.RequestHeaders, wantOps) || len(one.Members) != 1 {
		t.Errorf("/one: %+v, want a pool of its own with %v", one, wantOps)
	}
	if opts["STARTS_WITH /one"] != nil {
		t.Errorf("/one: options %+v, want none", opts["STARTS_WITH /one"])
	}
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "victim.example", path: "/"}); got != "svc" {
		t.Errorf("victim: %s", got)
	}

	split := opts["STARTS_WITH /split"]
	if split == nil || split.Split == nil || len(split.Split.Pools) != 2 || split.Split.FailWeight != 2 {
		t.Fatalf("/split: options %+v", split)
	}
	first, second := pools[split.Split.Pools[0].PoolID], pools[split.Split.Pools[1].PoolID]
	if first == nil || second == nil || split.Split.Pools[0].Weight != 3 || split.Split.Pools[1].Weight != 1 {
		t.Fatalf("/split: shares %+v, pools %v", split.Split.Pools, pools)
	}
	if byPath["/split"] != first || first.Service != "svc" || first.RequestHeaders[0].Value != "v1" || first.FailWeight != 0 {
		t.Errorf("/split first pool %+v (policy's %+v)", first, byPath["/split"])
	}
	if second.ID != model.ID("pool", "default", "svc2", "80") || second.RequestHeaders != nil {
		t.Errorf("/split second pool %+v, want svc2's own", second)
	}

	timed := opts["STARTS_WITH /timed"]
	if timed == nil || timed.Split == nil || len(timed.Split.Pools) != 2 || len(timed.RequestHeaders) != 1 {
		t.Fatalf("/timed: options %+v", timed)
	}
	for i, want := range []string{"a", "b"} {
		p := pools[timed.Split.Pools[i].PoolID]
		if p == nil || p.ServerTimeout.String() != "2s" || len(p.RequestHeaders) != 1 || p.RequestHeaders[0].Value != want {
			t.Errorf("/timed pool %d: %+v", i, p)
		}
	}
	if byPath["/timed"].ID != timed.Split.Pools[0].PoolID {
		t.Errorf("/timed: the policy's pool is not the split's first")
	}
}

// A backendRef's URLRewrite path: a pool of its own whose path is
// replaced (ReplaceFullPath) or whose matched prefix is (the rule's
// PathPrefix, "/" as ""), with the ref's header changes beside it; the
// policy has no rewrite of its own, and a ref without filters in the
// same rule keeps the Service's pool in the split.
func TestGatewayBackendRefURLRewrite(t *testing.T) {
	full := `{type: URLRewrite, urlRewrite: {path: {type: ReplaceFullPath, replaceFullPath: /rewritten-full}}}`
	prefix := func(to string) string {
		return `{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: ` + to + `}}}`
	}
	res := refsResult(t, `
  - matches: [{path: {value: /full}}]
    backendRefs: [{name: svc, port: 80, filters: [`+full+`]}]
  - matches: [{path: {value: /prefix/}}]
    backendRefs: [{name: svc, port: 80, filters: [`+prefix("/rewritten-prefix/")+`, {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: B, value: v}]}}]}]
  - backendRefs: [{name: svc, port: 80, filters: [`+prefix("/root")+`]}]
  - matches: [{path: {value: /two}}, {path: {value: /two}, method: POST}]
    backendRefs:
    - {name: svc, port: 80, filters: [`+prefix("/")+`]}
    - {name: svc2, port: 80}`)
	assertAccepted(t, res)
	lb := res.LoadBalancers[0]
	pools := lbPools(lb)
	byPath := routePools(t, res)
	opts := routeOptions(t, res, 80)
	svcPool := model.ID("pool", "default", "svc", "80")
	for _, tc := range []struct {
		path, rewritePath string
		prefix            *model.PrefixRewrite
		headers           int
	}{
		{"/full", "/rewritten-full", nil, 0},
		{"/prefix", "", &model.PrefixRewrite{Prefix: "/prefix", Replacement: "/rewritten-prefix"}, 1},
		{"/", "", &model.PrefixRewrite{Prefix: "", Replacement: "/root"}, 0},
	} {
		p := byPath[tc.path]
		if p == nil || p.ID == svcPool || p.Service != "svc" || p.RewritePath != tc.rewritePath ||
			!reflect.DeepEqual(p.PrefixRewrite, tc.prefix) || len(p.RequestHeaders) != tc.headers {
			t.Errorf("%s: pool %+v, want its own rewriting to %q %+v with %d header changes", tc.path, p, tc.rewritePath, tc.prefix, tc.headers)
		}
		if o := opts["STARTS_WITH "+tc.path]; o != nil {
			t.Errorf("%s: policy options %+v, want none (the pool rewrites)", tc.path, o)
		}
	}
	two := opts["STARTS_WITH /two"]
	if two == nil || two.Split == nil || len(two.Split.Pools) != 2 {
		t.Fatalf("/two: options %+v", two)
	}
	first, second := pools[two.Split.Pools[0].PoolID], pools[two.Split.Pools[1].PoolID]
	if first == nil || !reflect.DeepEqual(first.PrefixRewrite, &model.PrefixRewrite{Prefix: "/two", Replacement: ""}) {
		t.Errorf("/two first pool %+v", first)
	}
	if second == nil || second.ID != model.ID("pool", "default", "svc2", "80") || second.PrefixRewrite != nil {
		t.Errorf("/two second pool %+v, want svc2's own", second)
	}
	if got := gatewayRoute(t, lb, 80, gwRequest{host: "victim.example", path: "/"}); got != "svc" {
		t.Errorf("victim: %s", got)
	}
	if p := lb.Pool(svcPool); p != nil && (p.RewritePath != "" || p.PrefixRewrite != nil) {
		t.Errorf("the Service's shared pool rewrites: %+v", p)
	}
}

// Two routes asking the same of one Service share its pool with header
// changes; another change is another pool.
func TestGatewayBackendRefFiltersShared(t *testing.T) {
	ref := func(v string) string {
		return `{backendRefs: [{name: svc, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: B, value: ` + v + `}]}}]}]`
	}
	res := refsResult(t, `
  - `+ref("x")+`, matches: [{path: {value: /a}}]}
  - `+ref("x")+`, matches: [{path: {value: /b}}]}
  - `+ref("y")+`, matches: [{path: {value: /c}}]}`)
	byPath := routePools(t, res)
	if byPath["/a"] == nil || byPath["/a"].ID != byPath["/b"].ID || byPath["/a"].ID == byPath["/c"].ID {
		t.Errorf("pools /a %v, /b %v, /c %v", byPath["/a"], byPath["/b"], byPath["/c"])
	}
}

// The pools and the split render (render validates them again): the
// pool's header changes are backend lines, the split picks a backend.
func TestGatewayBackendRefFiltersRender(t *testing.T) {
	res := refsResult(t, `
  - backendRefs:
    - {name: svc, port: 80, weight: 10, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: infra-backend-v1}]}}]}
    - {name: svc2, port: 80, weight: 10, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: Backend, value: infra-backend-v2}]}}]}`)
	assertAccepted(t, res)
	lb := res.LoadBalancers[0]
	lb.VIP = "127.0.0.1"
	dir := t.TempDir()
	r, err := render.Render(lb, layout.LB{UUID: lb.UUID, Dir: dir}, nil, render.Options{Dir: dir})
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	for _, want := range []string{
		"    http-request set-header 'Backend' 'infra-backend-v1'\n",
		"    http-request set-header 'Backend' 'infra-backend-v2'\n",
		" rand(20) if ",
		"    use_backend %[var(txn.pier_split)] if { var(txn.pier_split) -m found }\n",
	} {
		if !bytes.Contains(r.Fragment, []byte(want)) {
			t.Errorf("no %q in\n%s", want, r.Fragment)
		}
	}
}
