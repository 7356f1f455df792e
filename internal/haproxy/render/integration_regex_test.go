package render

import (
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

func pathRegex(p string) model.L7Rule {
	return model.L7Rule{Type: model.RulePath, Compare: model.CompareRegex, Value: p}
}

// regexFixture is what translate makes of three Ingresses of app.test
// and one of other.test: use-regex with rewrite-target /$1 on
// /api/v[0-9]+/(.*) (to api), use-regex alone on /api/(.*) (to users),
// and Ingresses without annotations: Exact /api/v1/health, Prefix
// /api/v1/static and /docs, the catch-all, and other.test's /api. In
// translate's order (Exact, regular expressions longest first, Prefix
// longest first) the maps render it; unsorted (other.test's Prefix
// first) the ACL rules do, with the same answers.
func regexFixture(api, users, plain, catchAll model.Pool, unsorted bool) *model.LoadBalancer {
	with := func(p model.L7Policy, o model.PolicyOptions) model.L7Policy { p.Options = &o; return p }
	other := toPool(plain, hostIs("other.test"), pathPrefix("/api"))
	ps := []model.L7Policy{
		toPool(plain, hostIs("app.test"), pathIs("/api/v1/health")),
		with(toPool(api, hostIs("app.test"), pathRegex("/api/v[0-9]+/(.*)")),
			model.PolicyOptions{RewritePath: "/$1", RewriteRegex: "/api/v[0-9]+/(.*)"}),
		toPool(plain, hostIs("quote.test"), pathRegex("/a';evil%[src]#x")), // one word: TestRegexWordsQuoted
		toPool(users, hostIs("app.test"), pathRegex("/api/(.*)")),
		toPool(plain, hostIs("app.test"), pathPrefix("/api/v1/static")),
		toPool(plain, hostIs("app.test"), pathPrefix("/docs")),
		other,
		toPool(catchAll, hostIs("app.test"), pathPrefix("/")),
		toPool(users, hostWild("*.wild.test"), pathRegex("/w[0-9]/(.*)")),
	}
	if unsorted {
		ps = append([]model.L7Policy{other}, slices.DeleteFunc(ps, func(p model.L7Policy) bool { return p.Rules[0].Value == "other.test" })...)
	}
	return newLB([]model.Listener{httpListener("", routes(ps...))}, api, users, plain, catchAll)
}

// TestIntegrationRegexPaths runs use-regex paths through a real HAProxy,
// with map lookups and with ACL rules: /api/v1/users/42?x=1 reaches api
// as /users/42?x=1; the longer expression wins over /api/(.*); Exact
// wins over both and both win over a Prefix; other routes of the host,
// and another host's /api, are unaffected; matching is anchored and
// case-sensitive.
func TestIntegrationRegexPaths(t *testing.T) {
	bin := haproxyBin(t)
	if testing.Short() {
		t.Skip("starts HAProxy")
	}
	api := pool("api", memberAt(startURIBackend(t, "api")))
	users := pool("users", memberAt(startURIBackend(t, "users")))
	plain := pool("plain", memberAt(startURIBackend(t, "plain")))
	catchAll := pool("catch-all", memberAt(startURIBackend(t, "catch-all")))
	for _, unsorted := range []bool{false, true} {
		lb := regexFixture(api, users, plain, catchAll, unsorted)
		v, err := newView(lb, fixtureOptions(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if mapped := v.listeners[0].routes != nil; mapped == unsorted {
			t.Fatalf("unsorted %v: mapped %v", unsorted, mapped)
		}
		addr := serveLB(t, bin, lb)
		for _, tc := range []struct{ host, uri, backend, seen string }{
			{"app.test", "/api/v1/users/42?x=1", "api", "/users/42?x=1"},
			{"app.test", "/api/v22/users", "api", "/users"},
			{"app.test", "/api/v1/", "api", "/"},
			{"app.test", "/api/vx/users", "users", "/api/vx/users"},
			{"app.test", "/api/", "users", "/api/"},
			{"app.test", "/api/v1/health", "plain", "/api/v1/health"},
			{"app.test", "/api/v1/health/x", "api", "/health/x"},
			{"app.test", "/api/v1/static/app.js", "api", "/static/app.js"},
			{"app.test", "/docs/a?b=1", "plain", "/docs/a?b=1"},
			{"app.test", "/api", "catch-all", "/api"},
			{"app.test", "/API/v1/users", "catch-all", "/API/v1/users"},
			{"app.test", "/x/api/v1/users", "catch-all", "/x/api/v1/users"},
			{"other.test", "/api/v1/users/42", "plain", "/api/v1/users/42"},
			{"a.wild.test", "/w1/x", "users", "/w1/x"},
		} {
			resp := rawRequest(t, addr, "127.0.0.1", "GET "+tc.uri+" HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
			if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != tc.backend || resp.Header.Get("X-Seen-URI") != tc.seen {
				t.Errorf("unsorted %v: %s%s: %d from %q as %q, want %s as %q", unsorted, tc.host, tc.uri, resp.StatusCode,
					resp.Header.Get("X-Backend"), resp.Header.Get("X-Seen-URI"), tc.backend, tc.seen)
			}
		}
	}
}

// TestRegexRevalidated: the agent renders no PATH REGEX or RewriteRegex
// outside the subset, and no target naming more groups than the path
// has, whatever the store holds.
func TestRegexRevalidated(t *testing.T) {
	app := pool("app", member("10.0.0.1", 80))
	for name, tc := range map[string]struct {
		path string
		o    *model.PolicyOptions
	}{
		"path newline":      {path: "/a\n"},
		"path space":        {path: "/a b"},
		"path flags":        {path: "/(?i)a"},
		"path backref":      {path: `/(a)\1`},
		"path nested":       {path: "/(a+)+"},
		"path top-level |":  {path: "/a|/b"},
		"path relative":     {path: "a/(.*)"},
		"path long":         {path: "/" + strings.Repeat("a", 300)},
		"rewrite bad regex": {path: "/(.*)", o: &model.PolicyOptions{RewritePath: "/$1", RewriteRegex: "/(a+)+"}},
		"rewrite group":     {path: "/(.*)", o: &model.PolicyOptions{RewritePath: "/$2", RewriteRegex: "/(.*)"}},
		"rewrite format":    {path: "/(.*)", o: &model.PolicyOptions{RewritePath: "/$1%[src]", RewriteRegex: "/(.*)"}},
		"rewrite evil":      {path: "/(.*)", o: &model.PolicyOptions{RewritePath: "/$1;evil", RewriteRegex: "/(.*)"}},
		"rewrite no target": {path: "/(.*)", o: &model.PolicyOptions{RewriteRegex: "/(.*)"}},
		"rewrite and strip": {path: "/(.*)", o: &model.PolicyOptions{RewritePath: "/$1", RewriteRegex: "/(.*)", StripPrefix: "/a"}},
	} {
		lb := newLB([]model.Listener{httpListener("", routes(toPool(app, hostIs("a.example"), pathRegex(tc.path))))}, app)
		lb.Listeners[0].Policies[0].Options = tc.o
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestRegexWordsQuoted: a path regex holding "'", ";", "%" and "#" is
// one map_reg key, "'" written \x27 and the rest escaped, and in the
// ACL rules one single-quoted word (TestGoldenHAProxyCheck has HAProxy
// read both: regex-paths.cfg and regex-paths-acl.cfg).
func TestRegexWordsQuoted(t *testing.T) {
	app := pool("app", member("10.0.0.1", 80))
	const re = `\x27\;evil\%[crs]\#x` // [src] is a class, re-written sorted
	for _, unsorted := range []bool{false, true} {
		ps := []model.L7Policy{toPool(app, hostIs("a.example"), pathRegex("/a';evil%[src]#x"))}
		if unsorted {
			ps = append(ps, toPool(app, hostIs("a.example"), pathIs("/x")))
		}
		res, err := Render(newLB([]model.Listener{httpListener("", routes(ps...))}, app), lbAt(fixtureDir), nil, fixtureOptions())
		if err != nil {
			t.Fatal(err)
		}
		var maps []string
		for _, m := range res.Maps {
			maps = append(maps, string(m.Data))
		}
		inMap := strings.Contains(strings.Join(maps, ""), "(*LIMIT_MATCH=20000)^a\\.example/a"+re+" be_")
		inACL := strings.Contains(string(res.Fragment), " path -m reg '(*LIMIT_MATCH=20000)^/a"+re+"'\n")
		if inMap == unsorted || inACL != unsorted {
			t.Fatalf("unsorted %v: in a map %v, in an acl %v:\n%s\n%s", unsorted, inMap, inACL, res.Fragment, maps)
		}
	}
}
