package render

import (
	"strconv"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// TestMembersOnly: fragments rendered from one load balancer with other
// members are members only; any other change (a route, a pool setting,
// a slot more) is not, nor are hand-made lines that look like server
// lines but differ elsewhere.
func TestMembersOnly(t *testing.T) {
	web := pool("web", members(2)...)
	base := newLB([]model.Listener{httpListener(web.ID, nil)}, web)
	render := func(edit func(lb *model.LoadBalancer)) []byte {
		lb := base.Clone()
		edit(lb)
		return mustRender(t, lb, nil).Fragment
	}
	prev := render(func(*model.LoadBalancer) {})
	for _, tc := range []struct {
		name string
		edit func(lb *model.LoadBalancer)
		want bool
	}{
		{"the same", func(*model.LoadBalancer) {}, true},
		{"a member's address", func(lb *model.LoadBalancer) { lb.Pools[0].Members[0].Address = "10.9.9.9" }, true},
		{"a member's port", func(lb *model.LoadBalancer) { lb.Pools[0].Members[1].Port = 9999 }, true},
		{"a member's weight", func(lb *model.LoadBalancer) { lb.Pools[0].Members[0].Weight = 7 }, true},
		{"a member gone (its slot disabled)", func(lb *model.LoadBalancer) { lb.Pools[0].Members = lb.Pools[0].Members[:1] }, true},
		{"a member added (a slot enabled)", func(lb *model.LoadBalancer) {
			lb.Pools[0].Members = append(lb.Pools[0].Members, member("10.1.2.3", 80))
		}, true},
		{"an IPv6 member", func(lb *model.LoadBalancer) { lb.Pools[0].Members[0].Address = "2001:db8::7" }, true},
		{"a route", func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies = routes(toPool(lb.Pools[0], hostIs("a.example")))
		}, false},
		{"a pool's health check", func(lb *model.LoadBalancer) { lb.Pools[0].HealthCheck = false }, false},
		{"more members than slots", func(lb *model.LoadBalancer) {
			for i := range 40 {
				lb.Pools[0].Members = append(lb.Pools[0].Members, member("10.2.0."+strconv.Itoa(i+1), 80))
			}
		}, false},
	} {
		next := render(tc.edit)
		if got := MembersOnly(prev, next); got != tc.want {
			t.Errorf("%s: MembersOnly %v, want %v", tc.name, got, tc.want)
		}
	}

	line := "    server s1 10.0.0.1:80 weight 1 check inter 2s fall 3 rise 2"
	for _, tc := range []struct {
		name, next string
		want       bool
	}{
		{"disabled", "    server s1 10.0.0.2:81 weight 0 disabled check inter 2s fall 3 rise 2", true},
		{"another slot", "    server s2 10.0.0.1:80 weight 1 check inter 2s fall 3 rise 2", false},
		{"another option", "    server s1 10.0.0.1:80 weight 1 check inter 3s fall 3 rise 2", false},
		{"an option more", "    server s1 10.0.0.1:80 weight 1 backup check inter 2s fall 3 rise 2", false},
		{"disabled twice", "    server s1 10.0.0.1:80 weight 1 disabled disabled check inter 2s fall 3 rise 2", false},
		{"not an address", "    server s1 host.example:80 weight 1 check inter 2s fall 3 rise 2", false},
		{"not a weight", "    server s1 10.0.0.1:80 weight x check inter 2s fall 3 rise 2", false},
		{"a quoted word", "    server s1 10.0.0.1:80 weight 1 check inter 2s fall 3 rise 2 sni 'a b'", false},
		{"another indent", "  server s1 10.0.0.2:80 weight 1 check inter 2s fall 3 rise 2", false},
		{"not a server line", "    http-request deny", false},
		{"a line more", line + "\n    http-request deny", false},
	} {
		if got := MembersOnly([]byte("backend b\n"+line+"\n"), []byte("backend b\n"+tc.next+"\n")); got != tc.want {
			t.Errorf("%s: MembersOnly %v, want %v", tc.name, got, tc.want)
		}
	}
	if !strings.Contains(string(prev), "    server s1 ") {
		t.Fatalf("the fragment's server lines are not as this test expects:\n%s", prev)
	}
}
