package haproxydriver

import (
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// The agent re-validates the ingress-nginx options it reads
// from the store: a hostile value never reaches HAProxy, the last good
// configuration keeps serving, and a valid one is applied.
func TestOptionsRevalidatedByTheAgent(t *testing.T) {
	needHAProxy(t)
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lb.Listeners[0].Policies = []model.L7Policy{{ID: "l1", Position: 1, Action: model.ActionRedirectToPool, PoolID: "p1",
		Rules: []model.L7Rule{{Type: model.RulePath, Compare: model.CompareStartsWith, Value: "/"}}}}
	if _, err := d.Apply(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*model.LoadBalancer){
		"redirect URL with a newline": func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{
				RedirectURL: "https://a.example/\n    http-request return status 200", RedirectCode: 301}
		},
		"source with a suffix": func(lb *model.LoadBalancer) {
			lb.Listeners[0].Policies[0].Options = &model.PolicyOptions{AllowSources: []string{"10.0.0.0/8 if TRUE"}}
		},
		"negative timeout": func(lb *model.LoadBalancer) { lb.Pools[0].ServerTimeout = -time.Second },
	} {
		bad := lb.Clone()
		mutate(bad)
		if _, err := d.Apply(t.Context(), bad); err == nil {
			t.Errorf("%s: applied", name)
		}
		if got := get(lb); got != "one" {
			t.Errorf("%s: the last good configuration stopped serving (%q)", name, got)
		}
	}
	good := lb.Clone()
	good.Listeners[0].Policies[0].Options = &model.PolicyOptions{DenySources: []string{"127.0.0.1/32"}}
	if _, err := d.Apply(t.Context(), good); err != nil {
		t.Fatal(err)
	}
	if got := get(good); got != "" {
		t.Errorf("denied source still served %q", got)
	}
}
