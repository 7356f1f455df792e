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
