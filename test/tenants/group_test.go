package tenants

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/test/harness"
)

// Naming another namespace's pier.dev/load-balancer
// group does not join it unless an administrator shares the group. The
// attacker's /admin route for victim.example lands on a load balancer of
// its own; on the victim's addresses, every path still reaches the victim.
func TestGroupConsent(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort),
		ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "shop"}))...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)})
	addrs := p.Addresses(victimNS, "site")

	evil := ingress(attackerNS, "admin", victimHost, 5, map[string]string{annGroup: "shop"})
	prefix := networkingv1.PathTypePrefix
	evil.Spec.Rules[0].HTTP.Paths[0].Path, evil.Spec.Rules[0].HTTP.Paths[0].PathType = "/admin", &prefix
	write(t, manifests, "20-attack.json", append(service(attackerNS, attackerPort), evil)...)
	own := p.Addresses(attackerNS, "admin")
	for _, a := range own {
		for _, v := range addrs {
			if a == v {
				t.Fatalf("the attacker shares address %s with the victim: it joined the group", a)
			}
		}
	}
	if ing, _ := p.Ingress(attackerNS, "admin"); ing != nil && len(ing.Problems) != 0 {
		t.Errorf("a group of its own is no conflict: %v", ing.Problems)
	}
	for _, a := range addrs {
		for _, path := range []string{"/", "/admin", "/admin/x"} {
			code, reply, _, err := harness.Get(client, a, p.HTTPPort, victimHost, path)
			if err != nil || code != 200 || reply.Service != victimEcho {
				t.Errorf("%s%s on %s: status %d from %q (%v), want the victim", victimHost, path, a, code, reply.Service, err)
			}
		}
	}
}
