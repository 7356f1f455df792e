package translate

import (
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
)

// tlsSecretFor is the shared fixture (internal/fixture).
var tlsSecretFor = fixture.TLSSecret

// A newer member of a group pins an external IP. The
// group's address must not move: only the owner (oldest) may pin.
func TestOnlyTheOwnerPinsTheGroupsAddress(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shop"}
	victim := simpleIngress(t, "victim", "site", 0, group, "v.example", "/")
	attacker := simpleIngress(t, "victim", "late", 5,
		map[string]string{annotation.LoadBalancer: "shop", annotation.ExternalIP: "192.0.2.9"}, "w.example", "/")
	res := Ingresses(snapshotOf(victim, attacker), DefaultOptions())
	lb := onlyLB(t, res)
	if lb.RequestedFIP != "" {
		t.Errorf("a newer member moved the group's address to %s", lb.RequestedFIP)
	}
	ps := problemsFor(res, "late")
	if len(ps) != 1 || ps[0].Reason != "ExternalIPConflict" || !strings.Contains(ps[0].Message, "victim/site") {
		t.Errorf("want an ExternalIPConflict naming the owner, got %+v", ps)
	}
	// The owner itself may pin.
	victim.Annotations = map[string]string{annotation.LoadBalancer: "shop", annotation.ExternalIP: "192.0.2.1"}
	if lb := onlyLB(t, Ingresses(snapshotOf(victim, attacker), DefaultOptions())); lb.RequestedFIP != "192.0.2.1" {
		t.Errorf("the owner's pin = %q", lb.RequestedFIP)
	}
}

// --external-ip-namespaces: other namespaces' pins are ignored, with a
// reason on the Ingress.
func TestExternalIPNamespaces(t *testing.T) {
	pin := map[string]string{annotation.ExternalIP: "192.0.2.7"}
	allowed := simpleIngress(t, "infra", "edge", 0, pin, "e.example", "/")
	tenant := simpleIngress(t, "tenant", "grab", 0, map[string]string{annotation.ExternalIP: "192.0.2.8"}, "g.example", "/")
	opts := DefaultOptions()
	opts.ExternalIPNamespaces = []string{"infra"}
	res := Ingresses(snapshotOf(allowed, tenant), opts)
	for _, lb := range res.LoadBalancers {
		want := ""
		if lb.Sources[0].Namespace == "infra" {
			want = "192.0.2.7"
		}
		if lb.RequestedFIP != want {
			t.Errorf("%s: RequestedFIP %q, want %q", lb.Name, lb.RequestedFIP, want)
		}
	}
	ps := problemsFor(res, "grab")
	if len(ps) != 1 || ps[0].Reason != "ExternalIPNotAllowed" || ps[0].Severity != model.SeverityWarning {
		t.Errorf("want ExternalIPNotAllowed, got %+v", ps)
	}
}

// Naming another namespace's group does not join it
// unless the administrator shares the group with both namespaces.
func TestGroupsArePerNamespaceUnlessShared(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shop"}
	victim := simpleIngress(t, "victim", "site", 0, group, "v.example", "/")
	mine := simpleIngress(t, "victim", "more", 1, group, "m.example", "/")
	attacker := simpleIngress(t, "attacker", "join", 5, group, "a.example", "/")
	res := Ingresses(snapshotOf(victim, mine, attacker), DefaultOptions())
	if len(res.LoadBalancers) != 2 {
		t.Fatalf("want 2 load balancers (one per namespace), got %d", len(res.LoadBalancers))
	}
	if res.Accepted[model.IngressRef("victim", "site")] != res.Accepted[model.IngressRef("victim", "more")] {
		t.Error("one namespace's Ingresses of a group must share its load balancer")
	}
	if res.Accepted[model.IngressRef("victim", "site")] == res.Accepted[model.IngressRef("attacker", "join")] {
		t.Error("the attacker joined the victim's group")
	}
	names := map[string]bool{}
	for _, lb := range res.LoadBalancers {
		names[lb.Name] = true
	}
	if !names["group:victim/shop"] || !names["group:attacker/shop"] {
		t.Errorf("names = %v", names)
	}

	// Shared by the administrator: one load balancer, with the identity
	// a group had before groups were per namespace.
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shop": {"victim", "attacker"}}
	shared := Ingresses(snapshotOf(victim, mine, attacker), opts)
	lb := onlyLB(t, shared)
	if lb.Name != "group:shop" || lb.UUID != nameUUID("group", "shop") || len(lb.Sources) != 3 {
		t.Errorf("shared group = %s %s with %d sources", lb.Name, lb.UUID, len(lb.Sources))
	}
}

// In a group an administrator shared, a newer tenant's
// TLS entry for the owner's host, and one without hosts, must not cover
// the owner's host nor become the default certificate.
func TestTLSHostsObeyHostOwnership(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shop"}
	victim := simpleIngress(t, "victim", "site", 0, group, "v.example", "/")
	victim.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{"v.example"}, SecretName: "v-tls"}}
	attacker := simpleIngress(t, "attacker", "evil", 5, group, "a.example", "/")
	attacker.Spec.TLS = []networkingv1.IngressTLS{
		{Hosts: []string{"v.example", "a.example"}, SecretName: "a-tls"},
		{SecretName: "any-tls"},
	}
	snap := snapshotOf(attacker, victim)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "victim", "v-tls", "v.example"),
		tlsSecretFor(t, "attacker", "a-tls", "v.example", "a.example"),
		tlsSecretFor(t, "attacker", "any-tls", "v.example"))
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shop": {"*"}}
	res := Ingresses(snap, opts)
	lb := onlyLB(t, res)
	if len(lb.Listeners) != 2 {
		t.Fatalf("want an HTTPS listener")
	}
	certs := lb.Listeners[1].Certificates
	if len(certs) != 3 || certs[0].Namespace != "victim" {
		t.Fatalf("the owner's certificate must come first (the default): %+v", certs)
	}
	for _, c := range certs[1:] {
		if c.Namespace != "attacker" || len(c.Hosts) != 1 || c.Hosts[0] != "a.example" {
			t.Errorf("attacker's certificate %s covers %v, want [a.example] only", c.Secret, c.Hosts)
		}
	}
	if lb.Listeners[1].StrictSNI {
		t.Error("the owner has a certificate: it is the default, no strict-sni needed")
	}
	ps := problemsFor(res, "evil")
	if len(ps) != 1 || ps[0].Reason != "TLSHostConflict" || !strings.Contains(ps[0].Message, "belongs to namespace victim") {
		t.Errorf("want one TLSHostConflict naming the owner, got %+v", ps)
	}

	// Without a certificate of the owner's, no certificate is the
	// default: clients whose SNI matches nothing are refused.
	victim.Spec.TLS = nil
	if lb := onlyLB(t, Ingresses(snap, opts)); !lb.Listeners[1].StrictSNI || lb.Listeners[1].Certificates[0].Namespace != "attacker" {
		t.Errorf("owner without certificate: StrictSNI %v, certificates %+v", lb.Listeners[1].StrictSNI, lb.Listeners[1].Certificates)
	}

	// Alone in its load balancer, a hostless entry keeps no SNI filter.
	single := simpleIngress(t, "solo", "x", 0, nil, "s.example", "/")
	single.Spec.TLS = []networkingv1.IngressTLS{{SecretName: "s-tls"}}
	snap = snapshotOf(single)
	snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "solo", "s-tls", "s.example"))
	lb = onlyLB(t, Ingresses(snap, DefaultOptions()))
	if c := lb.Listeners[1].Certificates; len(c) != 1 || c[0].Hosts != nil {
		t.Errorf("single-namespace hostless entry = %+v", c)
	}
}

// In a shared group, an exact host under the owner's
// wildcard belongs to the owner, so a newer tenant cannot take
// admin.victim.example from *.victim.example (exact matches first). Hosts
// outside the wildcard stay the newcomer's.
func TestWildcardOwnsTheNamesItCovers(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shop"}
	victim := simpleIngress(t, "victim", "site", 0, group, "*.victim.example", "/")
	attacker := simpleIngress(t, "attacker", "evil", 5, group, "admin.victim.example", "/")
	other := simpleIngress(t, "attacker", "own", 6, group, "a.b.victim.example", "/")
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shop": {"*"}}
	res := Ingresses(snapshotOf(victim, attacker, other), opts)
	lb := onlyLB(t, res)
	for _, p := range lb.Listeners[0].Policies {
		if rulesMatch(p.Rules, "admin.victim.example", "/") {
			if ns := lb.Pool(p.PoolID).Namespace; ns != "victim" {
				t.Errorf("admin.victim.example routes to namespace %s's pool, want the victim's", ns)
			}
			break
		}
	}
	ps := problemsFor(res, "evil")
	if len(ps) != 1 || ps[0].Reason != "RouteConflict" || !strings.Contains(ps[0].Message, "belongs to namespace victim") {
		t.Errorf("want one RouteConflict naming the owner, got %+v", ps)
	}
	// Two labels below: not covered by the wildcard (Ingress v1).
	if ps := problemsFor(res, "own"); len(ps) != 0 {
		t.Errorf("a host the wildcard does not cover is no conflict: %+v", ps)
	}
}
