package haproxydriver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// A listener's routes reach HAProxy through map files beside the
// fragment, which names them: a change of routes writes a new map (named
// by its digest) and, once loaded, the old one goes.
func TestRouteMapsWrittenAndPruned(t *testing.T) {
	needHAProxy(t)
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	route := func(path string) []model.L7Policy {
		return []model.L7Policy{{ID: "r1", Position: 1, Action: model.ActionReject,
			Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: path}}}}
	}
	at, _ := d.layout.LB(lb.UUID)
	maps := func() []string {
		m, _ := filepath.Glob(filepath.Join(at.Dir, "routes-*.map"))
		return m
	}
	for _, path := range []string{"/a", "/b"} {
		next := lb.Clone()
		next.Listeners[0].Policies = route(path)
		if _, err := d.Apply(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		m := maps()
		if len(m) != 1 {
			t.Fatalf("after routing %s: maps %v, want one", path, m)
		}
		if b, _ := os.ReadFile(m[0]); string(b) != path+"/ pier_reject\n" {
			t.Fatalf("%s holds %q", m[0], b)
		}
		if frag, _ := os.ReadFile(at.Config()); !strings.Contains(string(frag), m[0]) {
			t.Fatalf("the fragment does not read %s", m[0])
		}
	}
}

// auth-url's Lua file is staged beside the fragment, which loads it, and
// pruned once a configuration without auth-url has loaded.
func TestAuthLuaWrittenAndPruned(t *testing.T) {
	needHAProxy(t)
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	lb := lbWith(2, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Pools = append(lb.Pools, model.Pool{ID: "p2", Name: "ns_auth_80", Members: lb.Pools[0].Members})
	withAuth := lb.Clone()
	withAuth.Listeners[0].Policies = []model.L7Policy{{ID: "r1", Position: 1, Action: model.ActionRedirectToPool, PoolID: "p1",
		Rules:   []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/"}},
		Options: &model.PolicyOptions{ExternalAuth: &model.ExternalAuth{PoolID: "p2", Host: "auth.ns.svc", Path: "/", Method: "GET"}}}}
	at, _ := d.layout.LB(lb.UUID)
	lua := func() []string {
		m, _ := filepath.Glob(filepath.Join(at.Dir, "auth-*.lua"))
		return m
	}
	if _, err := d.Apply(t.Context(), withAuth); err != nil {
		t.Fatal(err)
	}
	files := lua()
	if len(files) != 1 {
		t.Fatalf("auth lua files %v, want one", files)
	}
	if frag, _ := os.ReadFile(at.Config()); !strings.Contains(string(frag), "lua-load "+files[0]) {
		t.Fatalf("the fragment does not load %s", files[0])
	}
	if got := get(withAuth); got != "one" {
		t.Fatalf("through auth (the echo answers 200): %q", got)
	}
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	if files := lua(); len(files) != 0 {
		t.Fatalf("auth lua files %v left after auth-url went", files)
	}
}
