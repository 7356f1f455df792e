package badinput

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// Inputs the API server's own validation refuses, and the bytes no manifest file can
// carry, straight into translate.Ingresses: the controller must refuse
// what the API server (or the JSON decoder) would have stopped earlier.

// translateOne translates the victim plus one hand-built attacker and
// returns the attacker's problems; it checks that the victim still
// translates alone, unchanged.
func translateOne(t *testing.T, attacker *networkingv1.Ingress, extra ...*corev1.Secret) (*translate.Result, *api.IngressResponse) {
	t.Helper()
	victim := ingress(victimNS, "victim", victimHost, "/")
	snap := func(ings ...*networkingv1.Ingress) *source.Snapshot {
		s := &source.Snapshot{IngressClasses: []*networkingv1.IngressClass{ingressClass()}, Ingresses: ings, Secrets: extra}
		for _, ns := range []string{victimNS, attacker.Namespace} {
			objs := service(ns, "app", 9000)
			s.Services = append(s.Services, objs[0].(*corev1.Service))
			s.EndpointSlices = append(s.EndpointSlices, objs[1].(*discoveryv1.EndpointSlice))
		}
		return s
	}
	alone := translate.Ingresses(snap(victim), loopbackOptions())
	res := translate.Ingresses(snap(victim, attacker), loopbackOptions())
	victimLB := func(r *translate.Result) string {
		for _, lb := range r.LoadBalancers {
			if r.Accepted[model.IngressRef(victimNS, "victim")] == lb.UUID {
				return lb.SpecHash()
			}
		}
		return ""
	}
	if victimLB(alone) == "" || victimLB(alone) != victimLB(res) {
		t.Errorf("the victim's load balancer changed with the attacker present")
	}
	var problems []model.Problem
	for _, p := range res.Problems {
		if p.Namespace == attacker.Namespace {
			problems = append(problems, p)
		}
	}
	return res, &api.IngressResponse{Ingress: attacker, Problems: problems}
}

// TestApiserverRejectedHostsRefused sends the bad hosts, which the API
// server would refuse, to translation.
func TestApiserverRejectedHostsRefused(t *testing.T) {
	for _, host := range refusalRowByID("bad-host").payloads {
		t.Run(subtestName(0, "host", host), func(t *testing.T) {
			res, got := translateOne(t, ingress("evil-host", "evil", host, "/ok"))
			if _, ok := res.Accepted[model.IngressRef("evil-host", "evil")]; ok {
				t.Errorf("accepted")
			}
			checkRefused(t, got, hostTarget.names, host)
		})
	}
}

// TestInvalidUTF8Refused sends the raw bytes of the non-ASCII row's "/\xff" (and a host
// like it), which JSON and YAML manifests cannot carry, to translation.
func TestInvalidUTF8Refused(t *testing.T) {
	for _, c := range []struct {
		tg      target
		payload string
	}{{pathTarget, "/\xff"}, {pathTarget, "/a\xc0\xafb"}, {hostTarget, "a\xff.example"}} {
		t.Run(subtestName(0, c.tg.label, c.payload), func(t *testing.T) {
			ing := ingress("evil-utf8", "evil", "attacker.example", "/ok")
			c.tg.set(ing, c.payload)
			res, got := translateOne(t, ing)
			if _, ok := res.Accepted[model.IngressRef("evil-utf8", "evil")]; ok {
				t.Errorf("accepted")
			}
			checkRefused(t, got, c.tg.names, c.payload)
		})
	}
}

// TestCrossNamespaceSecretIgnored: "other-ns/secret" names an
// existing, valid Secret; it is still not used.
func TestCrossNamespaceSecretIgnored(t *testing.T) {
	valid := makeCert(t, "attacker.example", []string{"attacker.example"}, time.Now().Add(time.Hour))
	ing := ingress("evil-xns", "evil", "attacker.example", "/ok")
	ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"attacker.example"}, SecretName: "other-ns/secret"}}
	res, got := translateOne(t, ing, tlsSecret("other-ns", "secret", valid.cert, valid.key))
	uuid, ok := res.Accepted[model.IngressRef("evil-xns", "evil")]
	if !ok {
		t.Fatalf("refused; want served over HTTP: %s", problemList(got.Problems))
	}
	if pr := findProblem(got.Problems, model.SeverityWarning, "InvalidTLS"); pr == nil || pr.Field != "spec.tls[0].secretName" {
		t.Errorf("want an InvalidTLS warning on spec.tls[0].secretName: %s", problemList(got.Problems))
	}
	checkProblemText(t, got.Problems, "")
	for _, lb := range res.LoadBalancers {
		if lb.UUID != uuid {
			continue
		}
		for _, l := range lb.Listeners {
			if l.Protocol != model.ProtocolHTTP || len(l.Certificates) != 0 {
				t.Errorf("listener %s (%s) with %d certificates: the other namespace's Secret was used",
					l.Name, l.Protocol, len(l.Certificates))
			}
		}
	}
}

func refusalRowByID(id string) refusalRow {
	for _, r := range refusalRows {
		if r.id == id {
			return r
		}
	}
	panic("no row " + id)
}
