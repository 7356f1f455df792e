package translate

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// A canary Ingress gets no load balancer of its own: it joins the one of
// the main Ingress with the same namespace, host and path, whose policy
// then carries the canary (pool, weight, header, cookie), and gets the
// main's address. Without a main it is not served (a warning); a second
// canary of the same route is warned; another route of the main Ingress
// and another Ingress's route are left alone.
func TestCanary(t *testing.T) {
	main := simpleIngress(t, "ns", "main", 0, nil, "app.example", "/")
	main.Spec.Rules[0].HTTP.Paths = append(main.Spec.Rules[0].HTTP.Paths, *main.Spec.Rules[0].HTTP.Paths[0].DeepCopy())
	main.Spec.Rules[0].HTTP.Paths[1].Path = "/api"
	canaryAnn := map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-weight": "20",
		annotation.NginxPrefix + "canary-by-header": "X-Canary", annotation.NginxPrefix + "canary-by-cookie": "canary"}
	canary := simpleIngress(t, "ns", "main-canary", 1, canaryAnn, "app.example", "/")
	canary.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web-v2"
	late := simpleIngress(t, "ns", "late-canary", 2, canaryAnn, "app.example", "/")
	late.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web-v3"
	orphan := simpleIngress(t, "ns", "orphan", 3, canaryAnn, "nobody.example", "/")
	other := simpleIngress(t, "other", "main", 0, nil, "app2.example", "/")
	thief := simpleIngress(t, "other", "thief", 4, map[string]string{annotation.NginxPrefix + "canary": "true",
		annotation.NginxPrefix + "canary-weight": "100"}, "app.example", "/")
	res := Ingresses(snapshotOf(main, canary, late, orphan, other, thief), DefaultOptions())
	if len(res.LoadBalancers) != 2 {
		t.Fatalf("%d load balancers, want 2 (main's and other's)", len(res.LoadBalancers))
	}
	mainUUID := res.Accepted[model.IngressRef("ns", "main")]
	if res.Accepted[model.IngressRef("ns", "main-canary")] != mainUUID || mainUUID == "" {
		t.Errorf("the canary is not served by the main's load balancer: %v", res.Accepted)
	}
	if _, ok := res.Accepted[model.IngressRef("other", "thief")]; ok {
		t.Error("a canary of another namespace took the host's traffic")
	}
	for _, name := range []string{"late-canary", "orphan"} {
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; ok {
			t.Errorf("%s is served", name)
		}
	}
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.UUID == mainUUID {
			lb = l
		}
	}
	canaryPool := model.ID("pool", "ns", "web-v2", "80")
	if lb.Pool(canaryPool) == nil {
		t.Fatalf("no canary pool in %+v", lb.Pools)
	}
	for _, p := range lb.Listeners[0].Policies {
		switch p.Rules[len(p.Rules)-1].Value {
		case "/":
			want := model.Canary{PoolID: canaryPool, Weight: 20, WeightTotal: 100, Header: "X-Canary", Cookie: "canary",
				Source: model.Source{Kind: "Ingress", Namespace: "ns", Name: "main-canary"}}
			if p.Options == nil || p.Options.Canary == nil || *p.Options.Canary != want || p.Source.Name != "main" {
				t.Errorf("/: %+v", p.Options)
			}
		default:
			if p.Options != nil {
				t.Errorf("%s: %+v", p.Rules[len(p.Rules)-1].Value, p.Options)
			}
		}
	}
	if ps := problemsFor(res, "thief"); len(ps) != 1 || ps[0].Reason != "CanaryWithoutMain" || ps[0].Severity != model.SeverityError {
		t.Errorf("thief: %+v", ps)
	}
	if ps := problemsFor(res, "late-canary"); len(ps) != 1 || ps[0].Reason != "CanaryConflict" {
		t.Errorf("late-canary: %+v", ps)
	}
	if ps := problemsFor(res, "orphan"); len(ps) != 1 || ps[0].Reason != "CanaryWithoutMain" {
		t.Errorf("orphan: %+v", ps)
	}

	bad := func(ann map[string]string, fatal bool, msg string) {
		t.Helper()
		_, issues := annotation.Parse(ann)
		for _, is := range issues {
			if is.Fatal == fatal && strings.Contains(is.Message, msg) {
				return
			}
		}
		t.Errorf("%v: want a fatal=%v issue with %q, got %+v", ann, fatal, msg, issues)
	}
	bad(map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-weight": "101"}, true, "over canary-weight-total")
	bad(map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-weight": "300",
		annotation.NginxPrefix + "canary-weight-total": "200"}, true, "over canary-weight-total")
	bad(map[string]string{annotation.NginxPrefix + "canary-weight": "10"}, false, "without canary")
	bad(map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-by-header-value": "v2"}, false, "without canary-by-header")
	bad(map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-by-header-pattern": "^v2$"}, false, "without canary-by-header")
	bad(map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-by-header": "X", annotation.NginxPrefix + "canary-by-header-value": "v2",
		annotation.NginxPrefix + "canary-by-header-pattern": "^v2$"}, false, "pattern is ignored")
	bad(map[string]string{annotation.NginxPrefix + "canary-by-header-pattern": "^v2$"}, false, "without canary")
}

// TestCanaryHeaderPattern: the pattern reaches the model, unless a header
// value wins over it.
func TestCanaryHeaderPattern(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{{"", "^v[23]$"}, {"v2", ""}} {
		main := simpleIngress(t, "ns", "main", 0, nil, "a.example", "/")
		ann := map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-by-header": "X-Version",
			annotation.NginxPrefix + "canary-by-header-pattern": "^v[23]$"}
		if tc.value != "" {
			ann[annotation.NginxPrefix+"canary-by-header-value"] = tc.value
		}
		canary := simpleIngress(t, "ns", "canary", 1, ann, "a.example", "/")
		canary.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "svc2"
		p := onlyLB(t, Ingresses(snapshotOf(main, canary), DefaultOptions())).Listeners[0].Policies[0]
		if p.Options == nil || p.Options.Canary == nil || p.Options.Canary.HeaderPattern != tc.want || p.Options.Canary.HeaderValue != tc.value {
			t.Errorf("value %q: options %+v", tc.value, p.Options)
		}
	}
}
