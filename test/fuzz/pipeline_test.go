package fuzz

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// FuzzIngressToConfig drives one hostile Ingress, next to a benign victim
// in another namespace, through translate.Ingresses and render.Config.
// The property: either the attacker is refused with an Error problem whose
// message is printable, or every line of every rendered file tokenises
// into plain words with each host and path of the model intact as one
// word; and in both cases the victim's files are byte-identical to a
// run without the attacker.
func FuzzIngressToConfig(f *testing.F) {
	for _, a := range seedAttacks() {
		f.Add(a.host, a.path, a.pathType, a.group, a.balance, a.health, a.externalIP, a.tlsHost, a.service, a.port)
	}
	baseline := victimFiles(f, translate.Ingresses(snapshot(f, nil), translateOptions()))
	f.Fuzz(func(t *testing.T, host, path, pathType, group, balance, health, externalIP, tlsHost, service, port string) {
		checkAttack(t, &attack{
			host: host, path: path, pathType: pathType,
			group: group, balance: balance, health: health, externalIP: externalIP,
			tlsHost: tlsHost, service: service, port: port,
		}, baseline)
	})
}

// TestHugePath is the 1 MiB path, too big for a fuzz seed.
func TestHugePath(t *testing.T) {
	baseline := victimFiles(t, translate.Ingresses(snapshot(t, nil), translateOptions()))
	for _, pt := range []string{"Exact", "Prefix", "ImplementationSpecific"} {
		a := valid()
		a.path, a.pathType = "/"+strings.Repeat("a", 1<<20), pt
		checkAttack(t, &a, baseline)
	}
}

// TestLongestPath: a path of exactly encode.MaxPathLen bytes is served
// for every path type, and one byte more is refused. CI's fuzz run found
// a Prefix path at the limit that translation accepted and render
// refused: render's "below the path" prefix is one byte longer.
func TestLongestPath(t *testing.T) {
	baseline := victimFiles(t, translate.Ingresses(snapshot(t, nil), translateOptions()))
	for _, pt := range []string{"Exact", "Prefix", "ImplementationSpecific"} {
		for _, n := range []int{encode.MaxPathLen, encode.MaxPathLen + 1} {
			a := valid()
			a.path, a.pathType = "/"+strings.Repeat("a", n-1), pt
			if served := checkServed(t, &a, baseline); served != (n == encode.MaxPathLen) {
				t.Errorf("%s path of %d bytes: served %v", pt, n, served)
			}
		}
	}
}

// TestLongestHost: an exact and a wildcard host of encode.MaxHostLen
// bytes, as the rule's host and as the TLS host, are served; one byte
// more is refused.
func TestLongestHost(t *testing.T) {
	baseline := victimFiles(t, translate.Ingresses(snapshot(t, nil), translateOptions()))
	label := func(c string, n int) string { return strings.Repeat(c, n) }
	// 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 bytes.
	exact := label("h", 63) + "." + label("o", 63) + "." + label("s", 63) + "." + label("t", 61)
	wild := "*." + label("o", 63) + "." + label("s", 63) + "." + label("t", 63) + "." + label("u", 59)
	for _, h := range []string{exact, wild} {
		for _, tooLong := range []bool{false, true} {
			host := h
			if tooLong {
				host = h[:len(h)-1] + "xy"
			}
			for _, tls := range []bool{false, true} {
				a := valid()
				a.host = host
				if tls {
					a.tlsHost = host
				}
				if served := checkServed(t, &a, baseline); served == tooLong {
					t.Errorf("host of %d bytes (TLS %v): served %v", len(host), tls, served)
				}
			}
		}
	}
}

// checkServed is checkAttack for an attack that may be valid: it says
// whether the attacker's Ingress was served.
func checkServed(t *testing.T, a *attack, baseline rendered) bool {
	t.Helper()
	checkAttack(t, a, baseline)
	_, served := translate.Ingresses(snapshot(t, a), translateOptions()).Accepted[model.IngressRef(attackerNS, "evil")]
	return served
}

// victimFiles renders the victim's LoadBalancer; it must be served.
func victimFiles(t testing.TB, res *translate.Result) rendered {
	t.Helper()
	return victimOf(t, res, renderAll(res))
}

func victimOf(t testing.TB, res *translate.Result, files map[string]rendered) rendered {
	t.Helper()
	if res.Accepted[model.IngressRef(victimNS, "shop")] != victimUID {
		t.Fatalf("victim not served: accepted %v, problems %+v", res.Accepted, res.Problems)
	}
	r := files[victimUID]
	if r.err != nil {
		t.Fatalf("victim does not render: %v", r.err)
	}
	return r
}

func sameMap(a, b render.MapFile) bool { return a.Path == b.Path && bytes.Equal(a.Data, b.Data) }

func checkAttack(t *testing.T, a *attack, baseline rendered) {
	res := translate.Ingresses(snapshot(t, a), translateOptions())
	checkProblems(t, res.Problems)
	files := renderAll(res)
	v := victimOf(t, res, files)
	if !bytes.Equal(v.cfg, baseline.cfg) || !bytes.Equal(v.crt, baseline.crt) || !slices.EqualFunc(v.maps, baseline.maps, sameMap) {
		t.Fatalf("victim's files changed by the attacker:\n%s\n--- without the attacker:\n%s", v.cfg, baseline.cfg)
	}

	uuid, accepted := res.Accepted[model.IngressRef(attackerNS, "evil")]
	var refusals []model.Problem
	for _, p := range res.Problems {
		if p.Namespace == attackerNS && p.Severity == model.SeverityError {
			refusals = append(refusals, p)
		}
	}
	if !accepted {
		if len(refusals) == 0 {
			t.Fatalf("attacker neither served nor refused with an Error problem: %+v", res.Problems)
		}
		return
	}
	if len(refusals) > 0 {
		t.Fatalf("attacker served despite Error problems %+v", refusals)
	}
	for _, lb := range res.LoadBalancers {
		r := files[lb.UUID]
		if r.err != nil {
			// Translation accepted a value that the renderer refuses: the
			// two layers disagree, and the LoadBalancer would never serve.
			t.Fatalf("translation accepted, render refused %s: %v", lb.Name, r.err)
		}
		checkConfig(t, r.cfg, r.maps, lb)
		checkCrtList(t, r.crt, lb)
		if lb.UUID == uuid {
			checkModelHolds(t, a, lb, res.Problems)
		}
	}
}

// checkModelHolds: what the attacker asked for reaches the model as it
// was written (lowercase hosts are not lowercased for it, paths are not
// decoded), except the documented Prefix normalisation.
func checkModelHolds(t *testing.T, a *attack, lb *model.LoadBalancer, problems []model.Problem) {
	t.Helper()
	var mine []model.L7Policy
	for _, p := range lb.Listeners[0].Policies {
		// A from-to-www-redirect route is pier's, not the attacker's rule.
		if p.Source.Namespace == attackerNS && (p.Options == nil || p.Options.RedirectPrefix == "") {
			mine = append(mine, p)
		}
	}
	if len(mine) != 1 {
		t.Fatalf("attacker's policies: %+v", mine)
	}
	want := []model.L7Rule{}
	if a.host != "" {
		cmp := model.CompareEqualTo
		if strings.HasPrefix(a.host, "*") {
			cmp = model.CompareWildcard
		}
		want = append(want, model.L7Rule{Type: model.RuleHostName, Compare: cmp, Value: a.host})
	}
	path, cmp := a.path, model.CompareEqualTo
	// The prefix-strip form (rewrite-target "<path>/$2") routes
	// "P(/|$)(.*)" as Prefix P.
	if p, ok := strings.CutSuffix(path, "(/|$)(.*)"); ok && mine[0].Options != nil && mine[0].Options.StripPrefix != "" {
		path, cmp = p, model.CompareStartsWith
	}
	// use-regex, or a target naming groups, makes the path a regular
	// expression, as written.
	switch {
	case mine[0].Rules[len(mine[0].Rules)-1].Compare == model.CompareRegex && askedForRegex(a):
		cmp = model.CompareRegex
	case a.pathType != "Exact" || cmp == model.CompareStartsWith:
		cmp = model.CompareStartsWith
		if path = strings.TrimRight(path, "/"); path == "" {
			path = "/"
		}
	}
	want = append(want, model.L7Rule{Type: model.RulePath, Compare: cmp, Value: path})
	if got := mine[0].Rules; len(got) != len(want) || !rulesEqual(got, want) {
		t.Fatalf("model rules %+v, want %+v", got, want)
	}
	if a.tlsHost == "" || hasProblem(problems, "InvalidTLS") {
		return
	}
	for _, l := range lb.Listeners {
		for _, c := range l.Certificates {
			for _, h := range c.Hosts {
				if h == a.tlsHost {
					return
				}
			}
		}
	}
	t.Fatalf("TLS host %s accepted but on no certificate", encode.Printable(a.tlsHost))
}

// askedForRegex: the attacker set use-regex, or a rewrite-target with
// capture groups.
func askedForRegex(a *attack) bool {
	for k, v := range a.extra {
		switch {
		case strings.HasSuffix(k, "/use-regex") && v != "false":
			return true
		case strings.HasSuffix(k, "/rewrite-target") && strings.Contains(v, "$"):
			return true
		}
	}
	return false
}

func rulesEqual(a, b []model.L7Rule) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasProblem(ps []model.Problem, reason string) bool {
	for _, p := range ps {
		if p.Namespace == attackerNS && p.Reason == reason {
			return true
		}
	}
	return false
}
