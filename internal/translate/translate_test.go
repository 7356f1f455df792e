package translate

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

func simpleIngress(t *testing.T, ns, name string, age int, annotations map[string]string, host, path string) *networkingv1.Ingress {
	t.Helper()
	ing := ingressYAML(t, ns, age, `
metadata:
  name: `+name+`
spec:
  rules:
    - host: "`+host+`"
      http:
        paths:
          - path: "`+path+`"
            pathType: Prefix
            backend:
              service:
                name: web
                port:
                  number: 80
`)
	ing.Annotations = annotations
	return ing
}

func snapshotOf(ings ...*networkingv1.Ingress) *source.Snapshot {
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ourClass("pier", true)}}
	for _, ing := range ings {
		snap.Ingresses = append(snap.Ingresses, ing)
		withBackends(snap, ing)
	}
	return snap
}

func problemsFor(res *Result, name string) []model.Problem {
	var out []model.Problem
	for _, p := range res.Problems {
		if p.Name == name {
			out = append(out, p)
		}
	}
	return out
}

func TestClassSelection(t *testing.T) {
	other := "nginx"
	mk := func(name string, class *string, legacy string) *networkingv1.Ingress {
		ing := simpleIngress(t, "default", name, 0, nil, "a.example", "/")
		ing.Spec.IngressClassName = class
		if legacy != "" {
			ing.Annotations = map[string]string{annotationLegacyClass: legacy}
		}
		return ing
	}
	pier := "pier"
	tests := []struct {
		name          string
		ing           *networkingv1.Ingress
		defaultIsOurs bool
		classless     bool
		want          bool
	}{
		{"named class ours", mk("a", &pier, ""), false, false, true},
		{"named class other", mk("b", &other, ""), true, true, false},
		{"legacy annotation ours", mk("c", nil, "pier"), false, false, true},
		{"legacy annotation other", mk("d", nil, "nginx"), true, true, false},
		{"classless, our default", mk("e", nil, ""), true, false, true},
		{"classless, no default", mk("f", nil, ""), false, false, false},
		{"classless, taken by option", mk("g", nil, ""), false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ourClass("pier", tt.defaultIsOurs)}}
			snap.Ingresses = []*networkingv1.Ingress{tt.ing}
			opts := DefaultOptions()
			opts.TakeClassless = tt.classless
			res := Ingresses(snap, opts)
			if got := res.Ours[model.IngressRef("default", tt.ing.Name)]; got != tt.want {
				t.Fatalf("ours = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestInvalidIngressIsRefusedAndOthersServe(t *testing.T) {
	victim := simpleIngress(t, "victim", "victim", 0, nil, "victim.example", "/")
	cases := map[string]*networkingv1.Ingress{
		"newline in path":     simpleIngress(t, "evil", "p1", 1, nil, "a.example", "/a\n    http-request return status 200\n#"),
		"quote in path":       simpleIngress(t, "evil", "p2", 1, nil, "a.example", "/a'b"),
		"uppercase host":      simpleIngress(t, "evil", "p3", 1, nil, "A.EXAMPLE", "/"),
		"space in host":       simpleIngress(t, "evil", "p4", 1, nil, "exa mple.com", "/"),
		"ip host":             simpleIngress(t, "evil", "p5", 1, nil, "10.0.0.1", "/"),
		"double wildcard":     simpleIngress(t, "evil", "p6", 1, nil, "*.*.example", "/"),
		"bad annotation":      simpleIngress(t, "evil", "p7", 1, map[string]string{annotation.Balance: "roundrobin;evil"}, "a.example", "/"),
		"bad bool":            simpleIngress(t, "evil", "p8", 1, map[string]string{annotation.HealthCheck: "true\n"}, "a.example", "/"),
		"bad external ip":     simpleIngress(t, "evil", "p9", 1, map[string]string{annotation.ExternalIP: "1.2.3.4 "}, "a.example", "/"),
		"hash in path":        simpleIngress(t, "evil", "p10", 1, nil, "a.example", "/a#b"),
		"dot-dot path":        simpleIngress(t, "evil", "p11", 1, nil, "a.example", "/a/../b"),
		"percent-zero path":   simpleIngress(t, "evil", "p12", 1, nil, "a.example", "/a%00"),
		"nginx source range":  simpleIngress(t, "evil", "p13", 1, map[string]string{annotation.NginxPrefix + "whitelist-source-range": "10.0.0.0/8;evil"}, "a.example", "/"),
		"nginx redirect CRLF": simpleIngress(t, "evil", "p14", 1, map[string]string{annotation.NginxPrefix + "permanent-redirect": "https://a.example/\r\nX: y"}, "a.example", "/"),
		"nginx body size":     simpleIngress(t, "evil", "p15", 1, map[string]string{annotation.Prefix + "proxy-body-size": "1m\n"}, "a.example", "/"),
	}
	baseline := Ingresses(snapshotOf(victim), DefaultOptions())
	for name, attacker := range cases {
		t.Run(name, func(t *testing.T) {
			res := Ingresses(snapshotOf(victim, attacker), DefaultOptions())
			if _, ok := res.Accepted[model.IngressRef("evil", attacker.Name)]; ok {
				t.Fatalf("attacker accepted")
			}
			ps := problemsFor(res, attacker.Name)
			if len(ps) == 0 || ps[len(ps)-1].Severity != model.SeverityError || ps[len(ps)-1].Message == "" {
				t.Fatalf("want an Error problem with a reason, got %+v", ps)
			}
			for _, p := range ps {
				if strings.ContainsAny(p.Message, "\n\r\x00") {
					t.Errorf("problem message carries a control character: %q", p.Message)
				}
			}
			if !equalJSON(t, baseline.LoadBalancers, res.LoadBalancers) {
				t.Errorf("the victim's load balancer changed")
			}
		})
	}
}

func TestUnknownAndSnippetAnnotationsWarn(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, map[string]string{
		"pier.dev/balanse":               "leastconn",
		"pier.dev/server-snippet":        "http-request deny",
		"nginx.ingress.kubernetes.io/xx": "reported, never silently ignored",
	}, "a.example", "/")
	opts := DefaultOptions()
	opts.IgnoreSnippets = true // else the snippet refuses the Ingress
	res := Ingresses(snapshotOf(ing), opts)
	if _, ok := res.Accepted[model.IngressRef("ns", "a")]; !ok {
		t.Fatal("an unknown annotation must not refuse the Ingress")
	}
	ps := problemsFor(res, "a")
	if len(ps) != 3 || ps[0].Severity != model.SeverityWarning || !strings.Contains(ps[0].Message, "unsupported ingress-nginx") ||
		!strings.Contains(ps[2].Message, "snippet") {
		t.Fatalf("want three warnings (ingress-nginx, typo, snippet), got %+v", ps)
	}
}

func TestGroupSharesOneLoadBalancerAndResolvesConflicts(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shared"}
	older := simpleIngress(t, "team-a", "old", 0, group, "shop.example", "/")
	newer := simpleIngress(t, "team-b", "new", 5, group, "shop.example", "/")
	other := simpleIngress(t, "team-b", "api", 6, group, "api.example", "/")
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shared": {"team-a", "team-b"}}
	res := Ingresses(snapshotOf(newer, other, older), opts)
	lb := onlyLB(t, res)
	if lb.Name != "group:shared" || len(lb.Sources) != 3 {
		t.Fatalf("lb = %s with %d sources", lb.Name, len(lb.Sources))
	}
	for _, p := range lb.Listeners[0].Policies {
		if p.Rules[0].Value == "shop.example" && p.Source.Namespace != "team-a" {
			t.Errorf("the oldest Ingress must win shop.example/, got %s", p.Source.Key())
		}
	}
	ps := problemsFor(res, "new")
	if len(ps) != 1 || ps[0].Reason != "RouteConflict" || !strings.Contains(ps[0].Message, "team-a/old") {
		t.Errorf("want a RouteConflict warning naming the winner, got %+v", ps)
	}
	// Restarting with the objects in another order changes nothing.
	again := Ingresses(snapshotOf(other, older, newer), opts)
	if !equalJSON(t, res, again) {
		t.Error("result depends on input order")
	}
}

func TestPolicyOrder(t *testing.T) {
	ing := ingressYAML(t, "ns", 0, `
metadata:
  name: order
spec:
  rules:
    - http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: any-host, port: {number: 80}}}}
    - host: "*.example.com"
      http:
        paths:
          - {path: /, pathType: Prefix, backend: {service: {name: wildcard, port: {number: 80}}}}
    - host: www.example.com
      http:
        paths:
          - {path: /a, pathType: Prefix, backend: {service: {name: short, port: {number: 80}}}}
          - {path: /a/b, pathType: Prefix, backend: {service: {name: long, port: {number: 80}}}}
          - {path: /a, pathType: Exact, backend: {service: {name: exact, port: {number: 80}}}}
`)
	lb := onlyLB(t, Ingresses(snapshotOf(ing), DefaultOptions()))
	checkRequests(t, lb, []request{
		{"www.example.com", "/a", "exact"},
		{"www.example.com", "/a/b/c", "long"},
		{"www.example.com", "/a/x", "short"},
		{"www.example.com", "/z", "wildcard"},
		{"x.example.com", "/a", "wildcard"},
		{"other.org", "/a", "any-host"},
	})
	var order []string
	for _, p := range lb.Listeners[0].Policies {
		order = append(order, lb.Pool(p.PoolID).Service)
	}
	want := "exact long short wildcard any-host"
	if strings.Join(order, " ") != want {
		t.Errorf("policy order = %v, want %s", order, want)
	}
}

func TestMissingServiceIsA503RouteNotARefusal(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, nil, "a.example", "/")
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ourClass("pier", true)},
		Ingresses: []*networkingv1.Ingress{ing}}
	res := Ingresses(snap, DefaultOptions())
	lb := onlyLB(t, res)
	if len(lb.Pools) != 1 || len(lb.Pools[0].Members) != 0 {
		t.Fatalf("want one empty pool, got %+v", lb.Pools)
	}
	if ps := problemsFor(res, "a"); len(ps) != 1 || ps[0].Reason != "ServiceNotFound" || ps[0].Severity != model.SeverityWarning {
		t.Fatalf("problems = %+v", ps)
	}
}

func TestUUIDs(t *testing.T) {
	a := simpleIngress(t, "ns", "a", 0, nil, "a.example", "/")
	b := simpleIngress(t, "ns", "b", 0, nil, "b.example", "/")
	b.UID = "0f8a2d3e-1111-4222-8333-444455556666"
	c := simpleIngress(t, "ns", "c", 0, nil, "c.example", "/")
	c.UID = "../../etc/passwd"
	res := Ingresses(snapshotOf(a, b, c), DefaultOptions())
	if got := res.Accepted[model.IngressRef("ns", "b")]; got != string(b.UID) {
		t.Errorf("uuid of an Ingress with a UID = %s", got)
	}
	for _, key := range []model.ObjectRef{model.IngressRef("ns", "a"), model.IngressRef("ns", "c")} {
		if !uidPattern.MatchString(res.Accepted[key]) {
			t.Errorf("%s: derived uuid %q is not a UUID", key, res.Accepted[key])
		}
	}
	if again := Ingresses(snapshotOf(a), DefaultOptions()); again.Accepted[model.IngressRef("ns", "a")] != res.Accepted[model.IngressRef("ns", "a")] {
		t.Error("derived uuid is not stable")
	}
}

func TestDeterministicUnderShuffle(t *testing.T) {
	var ings []*networkingv1.Ingress
	for i := 0; i < 30; i++ {
		ann := map[string]string{}
		if i%3 == 0 {
			ann[annotation.LoadBalancer] = "g" + itoa(i%2)
		}
		ings = append(ings, simpleIngress(t, "ns"+itoa(i%4), "ing"+itoa(i), i%5, ann, "h"+itoa(i%7)+".example", "/p"+itoa(i%3)))
	}
	want := Ingresses(snapshotOf(ings...), DefaultOptions())
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 5; round++ {
		rng.Shuffle(len(ings), func(i, j int) { ings[i], ings[j] = ings[j], ings[i] })
		if got := Ingresses(snapshotOf(ings...), DefaultOptions()); !equalJSON(t, want, got) {
			t.Fatalf("round %d: result depends on input order", round)
		}
	}
}

func TestLimits(t *testing.T) {
	a := simpleIngress(t, "ns", "a", 0, nil, "a.example", "/")
	b := ingressYAML(t, "ns", 1, `
metadata: {name: b}
spec:
  rules:
    - host: b.example
      http:
        paths:
          - {path: /1, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
          - {path: /2, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`)
	c := simpleIngress(t, "ns", "c", 2, nil, "c.example", "/")

	opts := DefaultOptions()
	opts.MaxPathsPerIngress = 1
	res := Ingresses(snapshotOf(a, b, c), opts)
	if ps := problemsFor(res, "b"); len(ps) != 1 || !strings.Contains(ps[0].Message, "more than 1 paths") {
		t.Errorf("b: %+v", ps)
	}
	if len(res.Accepted) != 2 {
		t.Errorf("a and c must be served: %v", res.Accepted)
	}

	opts = DefaultOptions()
	opts.MaxIngresses = 2
	res = Ingresses(snapshotOf(c, b, a), opts)
	if ps := problemsFor(res, "c"); len(ps) != 1 || ps[0].Reason != "TooManyIngresses" {
		t.Errorf("the newest Ingress must be the one refused: %+v", ps)
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func TestProblemMessagesAreEscaped(t *testing.T) {
	for in, want := range map[string]string{
		`v"$HOME"`:   `"v\"$HOME\""`,
		"a\nb":       `"a\nb"`,
		"x\u202ey":   `"x\u202ey"`,
		`back\slash`: `"back\\slash"`,
	} {
		if got := annotation.QuoteForMessage(in); got != want {
			t.Errorf("annotation.QuoteForMessage(%q) = %s, want %s", in, got, want)
		}
	}
	if got := fieldForAnnotation("pier.dev/config-\u202ex"); strings.ContainsRune(got, '\u202e') {
		t.Errorf("field carries a raw bidi character: %q", got)
	}
}

// TestLongAnnotationNamesCutOnARune: a name past maxMessageValue bytes
// with a multi-byte character across the cut. The problem's field and
// message must stay valid UTF-8 (they reach the API's JSON and Events)
// and show no replacement character the name did not have; the field
// used to lose the last byte of its "…" and the cut split "é".
func TestLongAnnotationNamesCutOnARune(t *testing.T) {
	for _, before := range []int{33, 34, 35} { // "é" across, just before, just after the cut
		key := "nginx.ingress.kubernetes.io/" + strings.Repeat("a", before) + "éééé" + strings.Repeat("b", 20)
		ing := simpleIngress(t, "ns", "a", 0, map[string]string{key: "x"}, "a.example", "/")
		ps := problemsFor(Ingresses(snapshotOf(ing), DefaultOptions()), "a")
		if len(ps) != 1 {
			t.Fatalf("%d: want one warning, got %+v", before, ps)
		}
		for _, s := range []string{ps[0].Field, ps[0].Message, annotation.QuoteForMessage(key)} {
			if !utf8.ValidString(s) || strings.Contains(s, "\\ufffd") || strings.ContainsRune(s, utf8.RuneError) {
				t.Errorf("%d: %q is not the name cut on a character", before, s)
			}
		}
		if want := "metadata.annotations[" + key[:len("nginx.ingress.kubernetes.io/")+before]; !strings.HasPrefix(ps[0].Field, want) ||
			!strings.HasSuffix(ps[0].Field, "…]") {
			t.Errorf("%d: field %q, want %q…, cut with …]", before, ps[0].Field, want)
		}
	}
}

func TestOversizedAnnotationsAreRefused(t *testing.T) {
	big := simpleIngress(t, "ns", "big", 0, map[string]string{"example.com/blob": strings.Repeat("a", 300<<10)}, "a.example", "/")
	long := simpleIngress(t, "ns", "long", 0, map[string]string{annotation.LoadBalancer: strings.Repeat("a", 2000)}, "b.example", "/")
	res := Ingresses(snapshotOf(big, long), DefaultOptions())
	if ps := problemsFor(res, "big"); len(ps) != 1 || ps[0].Reason != "AnnotationsTooLarge" {
		t.Errorf("big: %+v", ps)
	}
	if ps := problemsFor(res, "long"); len(ps) != 1 || ps[0].Reason != "InvalidAnnotation" || !strings.Contains(ps[0].Message, "over the limit") {
		t.Errorf("long: %+v", ps)
	}
}

// A port no Service can have makes only that route answer 503.
func TestOutOfRangePortIsA503Route(t *testing.T) {
	ing := ingressYAML(t, "ns", 0, `
metadata: {name: p0}
spec:
  rules:
    - host: a.example
      http:
        paths:
          - {path: /bad, pathType: Prefix, backend: {service: {name: web, port: {number: 0}}}}
          - {path: /ok, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
`)
	svc, es := backend("ns", "web", "", 80, 1)
	snap := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ourClass("pier", true)},
		Ingresses: []*networkingv1.Ingress{ing}, Services: []*corev1.Service{svc}, EndpointSlices: []*discoveryv1.EndpointSlice{es}}
	res := Ingresses(snap, DefaultOptions())
	lb := onlyLB(t, res)
	bad, ok := lb.Pool(lb.Listeners[0].Policies[0].PoolID), lb.Pool(lb.Listeners[0].Policies[1].PoolID)
	if lb.Listeners[0].Policies[0].Rules[1].Value != "/bad" || len(bad.Members) != 0 || len(ok.Members) != 1 {
		t.Fatalf("want /bad with an empty pool and /ok served: %+v", lb.Pools)
	}
	if ps := problemsFor(res, "p0"); len(ps) != 1 || ps[0].Reason != "ServicePortNotFound" {
		t.Fatalf("problems = %+v", ps)
	}
}

// A tenant who joins another namespace's group cannot add routes to a
// host that namespace serves, not even a more specific path.
func TestGroupHostsBelongToTheFirstNamespace(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shop"}
	victim := simpleIngress(t, "victim", "site", 0, group, "v.example", "/")
	attacker := simpleIngress(t, "attacker", "admin", 5, group, "v.example", "/admin")
	sameNS := simpleIngress(t, "victim", "more", 6, group, "v.example", "/more")
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shop": {"*"}}
	res := Ingresses(snapshotOf(victim, attacker, sameNS), opts)
	lb := onlyLB(t, res)
	if got := routeRequest(lb, "v.example", "/admin"); got != "web" || lb.Listeners[0].Policies[0].Source.Namespace != "victim" {
		t.Errorf("the attacker routed v.example/admin: %+v", lb.Listeners[0].Policies)
	}
	ps := problemsFor(res, "admin")
	if len(ps) != 1 || ps[0].Reason != "RouteConflict" || !strings.Contains(ps[0].Message, "belongs to namespace victim") {
		t.Errorf("want a RouteConflict naming the owner, got %+v", ps)
	}
	if len(problemsFor(res, "more")) != 0 || len(lb.Listeners[0].Policies) != 2 {
		t.Errorf("the owner's namespace must be able to add paths: %+v", lb.Listeners[0].Policies)
	}
}

func TestUnusableEndpointAddressesAreSkipped(t *testing.T) {
	ing := simpleIngress(t, "ns", "a", 0, nil, "a.example", "/")
	snap := snapshotOf(ing)
	es := snap.EndpointSlices[0]
	es.Endpoints = append(es.Endpoints,
		discoveryv1.Endpoint{Addresses: []string{"0.0.0.0"}},
		discoveryv1.Endpoint{Addresses: []string{"224.0.0.1"}})
	lb := onlyLB(t, Ingresses(snap, DefaultOptions()))
	if got := len(lb.Pools[0].Members); got != 1 {
		t.Fatalf("want only the usable endpoint, got %d members: %+v", got, lb.Pools[0].Members)
	}
}

// Without drops the refused sources from a copy: the result it is called
// on stays what translation gave, so that a later patch of it (an
// endpoint or Ingress change) still holds the refused source, which the
// reconciler then refuses again or admits.
func TestWithoutLeavesTheResult(t *testing.T) {
	a, b := model.IngressRef("ns", "a"), model.IngressRef("ns", "b")
	res := &Result{Accepted: map[model.ObjectRef]string{a: "uuid-a", b: "uuid-b"}}
	if got := res.Without(nil); got != res {
		t.Fatal("nothing refused: want the result itself, not a copy")
	}
	got := res.Without([]model.ObjectRef{b})
	if _, ok := got.Accepted[b]; ok || got.Accepted[a] != "uuid-a" {
		t.Fatalf("without b: accepted %v, want a alone", got.Accepted)
	}
	if res.Accepted[b] != "uuid-b" || len(res.Accepted) != 2 {
		t.Fatalf("the result itself changed: accepted %v", res.Accepted)
	}
}
