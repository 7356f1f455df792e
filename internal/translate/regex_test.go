package translate

import (
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// TestRegexPaths: with use-regex (or a target naming groups) an
// Ingress's paths are PATH REGEX rules, ordered after Exact and before
// Prefix, longest first; another Ingress of the host keeps its
// pathTypes; the route carries its expression for the rewrite.
func TestRegexPaths(t *testing.T) {
	api := simpleIngress(t, "ns", "api", 0, map[string]string{annotation.LoadBalancer: "g",
		annotation.NginxPrefix + "use-regex": "true", annotation.NginxPrefix + "rewrite-target": "/$1"}, "a.example", "/api/v[0-9]+/(.*)")
	short := simpleIngress(t, "ns", "short", 1, map[string]string{annotation.LoadBalancer: "g", annotation.NginxPrefix + "use-regex": "true"},
		"a.example", "/api/(.*)")
	plain := simpleIngress(t, "ns", "plain", 2, map[string]string{annotation.LoadBalancer: "g"}, "a.example", "/api")
	lb := onlyLB(t, Ingresses(snapshotOf(api, short, plain), DefaultOptions()))
	type row struct {
		compare model.CompareType
		value   string
	}
	var got []row
	for _, p := range lb.Listeners[0].Policies {
		got = append(got, row{p.Rules[1].Compare, p.Rules[1].Value})
	}
	want := []row{{model.CompareRegex, "/api/v[0-9]+/(.*)"}, {model.CompareRegex, "/api/(.*)"}, {model.CompareStartsWith, "/api"}}
	if len(got) != len(want) {
		t.Fatalf("policies %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("policy %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	ps := lb.Listeners[0].Policies
	if o := ps[0].Options; o == nil || o.RewritePath != "/$1" || o.RewriteRegex != "/api/v[0-9]+/(.*)" || o.StripPrefix != "" {
		t.Errorf("rewrite options %+v", o)
	}
	if ps[1].Options != nil || ps[2].Options != nil {
		t.Errorf("options of the others: %+v %+v", ps[1].Options, ps[2].Options)
	}
}

// TestRegexPathsExactFirst: an Exact path of another Ingress comes before
// the regular expressions; a use-regex Ingress's Exact path is a regular
// expression too (ingress-nginx reads it so whatever its pathType).
func TestRegexPathsExactFirst(t *testing.T) {
	exact := ingressYAML(t, "ns", 0, `
metadata:
  name: exact
  annotations:
    pier.dev/load-balancer: g
spec:
  rules:
    - host: a.example
      http:
        paths:
          - path: /x
            pathType: Exact
            backend: {service: {name: svc, port: {number: 80}}}
`)
	regex := ingressYAML(t, "ns", 1, `
metadata:
  name: regex
  annotations:
    nginx.ingress.kubernetes.io/use-regex: "true"
    pier.dev/load-balancer: g
spec:
  rules:
    - host: a.example
      http:
        paths:
          - path: /y
            pathType: Exact
            backend: {service: {name: svc, port: {number: 80}}}
`)
	lb := onlyLB(t, Ingresses(snapshotOf(exact, regex), DefaultOptions()))
	ps := lb.Listeners[0].Policies
	if len(ps) != 2 || ps[0].Rules[1].Compare != model.CompareEqualTo || ps[1].Rules[1].Compare != model.CompareRegex {
		t.Errorf("policies %+v", ps)
	}
}

// TestRegexPathsStripFormKept: the prefix-strip form stays a Prefix
// route with StripPrefix, with or without use-regex.
func TestRegexPathsStripFormKept(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.NginxPrefix + "use-regex": "true", annotation.NginxPrefix + "rewrite-target": "/v2/$2"},
		"a.example", "/shop(/|$)(.*)")
	p := onlyLB(t, Ingresses(snapshotOf(ing), DefaultOptions())).Listeners[0].Policies[0]
	if p.Rules[1].Compare != model.CompareStartsWith || p.Rules[1].Value != "/shop" ||
		p.Options == nil || p.Options.StripPrefix != "/shop" || p.Options.RewritePath != "/v2/" || p.Options.RewriteRegex != "" {
		t.Errorf("policy %+v options %+v", p, p.Options)
	}
}

// TestRegexPathsInjection: nothing outside the subset reaches a policy.
func TestRegexPathsInjection(t *testing.T) {
	for _, path := range []string{"/a';evil", "/a ;evil", "/a\n", "/x%[src]", "/(?i)a", "/a|/b", `/\x27`, `/(a)\1`, "/a{,2}", "/(a*)*"} {
		ing := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.NginxPrefix + "use-regex": "true"}, "a.example", "/")
		ing.Spec.Rules[0].HTTP.Paths[0].Path = path
		res := Ingresses(snapshotOf(ing), DefaultOptions())
		if path == "/a';evil" || path == "/x%[src]" {
			// Accepted: "'" is written \x27 and "%" escaped; HAProxy reads
			// neither (TestRegexWordsQuoted in render).
			if len(res.LoadBalancers) != 1 {
				t.Errorf("%q: refused: %+v", path, res.Problems)
			}
			continue
		}
		if len(res.LoadBalancers) != 0 || len(problemsFor(res, "a")) == 0 || problemsFor(res, "a")[0].Reason != "InvalidIngress" {
			t.Errorf("%q: served, or problems %+v", path, res.Problems)
		}
	}
	for _, target := range []string{"/$1;evil", "/$1'", "/$1%[src]", "/$1 x", `/$1\2`, "/$1\n"} {
		ing := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.NginxPrefix + "use-regex": "true", annotation.NginxPrefix + "rewrite-target": target},
			"a.example", "/(.*)")
		res := Ingresses(snapshotOf(ing), DefaultOptions())
		if len(res.LoadBalancers) != 0 || len(problemsFor(res, "a")) == 0 || problemsFor(res, "a")[0].Reason != "InvalidAnnotation" {
			t.Errorf("target %q: served, or problems %+v", target, res.Problems)
		}
	}
}

// TestRegexPathsCanary: a canary of a regular-expression path joins the
// main route when it sets use-regex too; without it, it has no main route.
func TestRegexPathsCanary(t *testing.T) {
	regex := map[string]string{annotation.NginxPrefix + "use-regex": "true"}
	for _, tc := range []struct {
		canaryRegex bool
		attached    bool
	}{{true, true}, {false, false}} {
		main := simpleIngress(t, "ns", "main", 0, regex, "a.example", "/api/(.*)")
		ann := map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-weight": "50"}
		if tc.canaryRegex {
			ann[annotation.NginxPrefix+"use-regex"] = "true"
		}
		canary := simpleIngress(t, "ns", "canary", 1, ann, "a.example", "/api/(.*)")
		canary.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "svc2"
		res := Ingresses(snapshotOf(main, canary), DefaultOptions())
		p := onlyLB(t, res).Listeners[0].Policies[0]
		if attached := p.Options != nil && p.Options.Canary != nil; attached != tc.attached {
			t.Errorf("canary use-regex %v: attached %v, problems %+v", tc.canaryRegex, attached, res.Problems)
		}
	}
}
