package render

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestAffinityIsRevalidated: a stored model with a bad cookie is refused
// by render, whatever translation let through.
func TestAffinityIsRevalidated(t *testing.T) {
	for name, a := range map[string]model.CookieAffinity{
		"no name":        {},
		"name ;evil":     {Name: "route;evil"},
		"name quote":     {Name: "a'"},
		"name newline":   {Name: "a\ncookie b insert"},
		"name space":     {Name: "a b"},
		"path relative":  {Name: "a", Path: "app"},
		"path ;evil":     {Name: "a", Path: "/app;evil"},
		"path percent":   {Name: "a", Path: "/a%20b"},
		"path dotdot":    {Name: "a", Path: "/a/../b"},
		"path newline":   {Name: "a", Path: "/a\n"},
		"max age <0":     {Name: "a", MaxAgeSeconds: -1},
		"max age huge":   {Name: "a", MaxAgeSeconds: maxCookieAge + 1},
		"samesite lower": {Name: "a", SameSite: "lax"},
		"samesite evil":  {Name: "a", SameSite: "Lax;evil"},
	} {
		web := pool("web", member("10.0.0.1", 80))
		web.Affinity = &a
		lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

// TestAffinityCookieFollowsTheSlot: the cookie's value is the slot, and
// a member keeps its slot when another joins before it in sort order,
// so the cookies clients hold keep reaching the same member.
func TestAffinityCookieFollowsTheSlot(t *testing.T) {
	web := pool("web", member("10.0.0.2", 80))
	web.Affinity = &model.CookieAffinity{Name: "a", SameSite: "None"}
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	r := mustRender(t, lb, nil)
	frag := string(r.Fragment)
	if !strings.Contains(frag, "server s1 10.0.0.2:80 weight 1 cookie s1 check") {
		t.Fatalf("10.0.0.2 is not s1:\n%s", frag)
	}
	// SameSite=None needs Secure, or browsers drop the cookie.
	if !strings.Contains(frag, "cookie 'a' insert indirect nocache httponly secure attr SameSite=None\n") {
		t.Errorf("cookie line:\n%s", frag)
	}
	lb.Pools[0].Members = []model.Member{member("10.0.0.1", 80), member("10.0.0.2", 80)}
	frag = string(mustRender(t, lb, r.Slots).Fragment)
	for _, want := range []string{"server s1 10.0.0.2:80 weight 1 cookie s1 check", "server s2 10.0.0.1:80 weight 1 cookie s2 check"} {
		if !strings.Contains(frag, want) {
			t.Errorf("after a join, no %q:\n%s", want, frag)
		}
	}
}

// TestAffinityChangeReloads: a cookie change is a backend change, which
// the runtime API cannot make; the plan says so.
func TestAffinityChangeReloads(t *testing.T) {
	web := pool("web", member("10.0.0.1", 80))
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	old := mustRender(t, lb, nil)
	lb.Pools[0].Affinity = &model.CookieAffinity{Name: "a"}
	p, err := PlanUpdate(old, mustRender(t, lb, old.Slots))
	if err != nil || !p.Reload || !strings.Contains(p.Reason, "settings changed") {
		t.Errorf("plan %+v, %v", p, err)
	}
}

// TestProtocolIsRevalidated: a stored pool with another protocol is
// refused; a protocol change reloads (server words are not in the
// skeleton, so the plan must see it in the pool).
func TestProtocolIsRevalidated(t *testing.T) {
	for _, bad := range []model.BackendProtocol{"AJP", "https", "HTTPS verify required", "GRPC\n"} {
		web := pool("web", member("10.0.0.1", 80))
		web.Protocol = bad
		lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
		if _, err := Render(lb, lbAt(fixtureDir), nil, fixtureOptions()); err == nil {
			t.Errorf("%q: rendered", bad)
		}
	}
	web := pool("web", member("10.0.0.1", 80))
	lb := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	old := mustRender(t, lb, nil)
	lb.Pools[0].Protocol = model.BackendGRPC
	p, err := PlanUpdate(old, mustRender(t, lb, old.Slots))
	if err != nil || !p.Reload || !strings.Contains(p.Reason, "settings changed") {
		t.Errorf("plan %+v, %v", p, err)
	}
}
