package tenants

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

const (
	victimNS, attackerNS = "victim", "attacker"
	victimHost           = "victim.example"
	victimEcho           = "victim-app"
	attackerEcho         = "attacker-app"
	annGroup             = "pier.dev/load-balancer"
	annIP                = "pier.dev/external-ip"
)

// Address takeover by a group join and by a squatting pin. The victim's
// Ingress is in group "shop". In one change the attacker (another
// namespace) joins "shop" with its own pin, which used to move the group's
// floating IP, and pins the victim's floating IP with Host victim.example,
// which used to take it over; a newer Ingress of the victim's own namespace
// pins too. Then the victim is deleted and re-created (a new UID) while the
// pin waits. The victim keeps its VIP and FIP throughout, and
// victim.example on them always reaches the victim.
func TestAddressTakeover(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "05-victim-svc.json", service(victimNS, victimPort)...)
	victimFile := filepath.Join(manifests, "10-victim.json")
	victim := func(uid string) {
		write(t, manifests, "10-victim.json",
			withUID(ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "shop"}), uid))
	}
	victim("11111111-1111-4111-8111-111111111111")
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--address-quarantine", "1h"}})
	before := p.Addresses(victimNS, "site")
	if len(before) != 2 {
		t.Fatalf("victim addresses %v, want a VIP and a FIP", before)
	}
	vip, fip := before[0], before[1]
	t.Logf("victim: VIP %s FIP %s", vip, fip)
	expectServed(t, p, vip, victimHost, victimEcho, 3)

	// The attack, in one change.
	attack := append(service(attackerNS, attackerPort),
		ingress(attackerNS, "join", "join.example", 5, map[string]string{annGroup: "shop", annIP: "127.20.9.9"}),
		ingress(attackerNS, "squat", victimHost, 6, map[string]string{annIP: fip}),
		ingress(victimNS, "late", "late.example", 7, map[string]string{annGroup: "shop", annIP: "127.20.9.8"}))
	write(t, manifests, "20-attack.json", attack...)
	join := p.Addresses(attackerNS, "join") // the change has applied
	p.Addresses(victimNS, "late")
	if got := p.Addresses(victimNS, "site"); !sameAddresses(got, before) {
		t.Errorf("victim's addresses moved: %v, were %v", got, before)
	}
	for _, a := range before {
		expectServed(t, p, a, victimHost, victimEcho, 10)
	}
	if strings.Contains(strings.Join(join, ","), vip) || strings.Contains(strings.Join(join, ","), fip) {
		t.Errorf("the attacker joined the victim's group: it publishes %v", join)
	}
	squat := waitProblem(t, p, attackerNS, "squat", "ExternalIPInUse")
	t.Logf("squat refused: %s", squat.Message)
	late := waitProblem(t, p, victimNS, "late", "ExternalIPConflict")
	t.Logf("newer member's pin refused: %s", late.Message)

	// The victim is deleted; the squatter's pin stays refused. (The
	// victim's own newer Ingress goes first: left alone in the group it
	// would become its owner, and its pin would then apply, by design.)
	write(t, manifests, "20-attack.json", attack[:len(attack)-1]...)
	harness.WaitFor(t, 15*time.Second, "victim/late gone", func() bool {
		_, err := p.Ingress(victimNS, "late")
		return err != nil
	})
	if err := os.Remove(victimFile); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 15*time.Second, "the victim's Ingress gone", func() bool {
		_, err := p.Ingress(victimNS, "site")
		return err != nil
	})
	harness.WaitFor(t, 15*time.Second, "the squatter refused by the quarantine", func() bool {
		return strings.Contains(problemList(p, attackerNS, "squat"), "reserved for it")
	})
	if ing, err := p.Ingress(attackerNS, "squat"); err == nil && len(ing.Status.LoadBalancer.Ingress) > 0 {
		t.Fatalf("the squatter got addresses %v while the victim's are in quarantine", ing.Status.LoadBalancer.Ingress)
	}
	if code, reply, _, err := harness.Get(client, fip, p.HTTPPort, victimHost, "/"); err == nil && reply.Service == attackerEcho {
		t.Fatalf("victim.example on the freed FIP reached the attacker (status %d)", code)
	}

	// Re-created (a new UID): the victim gets both addresses back.
	victim("22222222-2222-4222-8222-222222222222")
	harness.WaitFor(t, 15*time.Second, "the re-created victim served", func() bool {
		ing, err := p.Ingress(victimNS, "site")
		return err == nil && len(ing.Status.LoadBalancer.Ingress) == 2
	})
	if got := p.Addresses(victimNS, "site"); !sameAddresses(got, before) {
		t.Fatalf("re-created victim got %v, had %v", got, before)
	}
	for _, a := range before {
		harness.WaitFor(t, 10*time.Second, "victim.example served on "+a, func() bool {
			code, reply, _, err := harness.Get(client, a, p.HTTPPort, victimHost, "/")
			return err == nil && code == 200 && reply.Service == victimEcho
		})
		expectServed(t, p, a, victimHost, victimEcho, 10)
	}
	waitProblem(t, p, attackerNS, "squat", "ExternalIPInUse")
	t.Logf("after re-creation: %s", problemList(p, attackerNS, "squat"))
}
