package tenants

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// Item 6 of issue 14: one tenant's huge group must not hold up another
// tenant's change. The review measured a 10,000-path group taking 13 s
// per apply and an unrelated load balancer's change waiting 14.7 s
// behind it (applies are serial in the agent). With map routing such a
// group renders, checks and starts in about a second, so the wait is
// bounded by that one apply. The bound asserted here, 4 s, is far above
// what is measured (0.4-0.9 s on this machine) and far below the 14.7 s
// the review saw.
func TestHugeGroupDoesNotHoldOthersUp(t *testing.T) {
	const bound = 4 * time.Second
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	victim := func(paths ...string) []runtime.Object {
		ing := ingress(victimNS, "site", victimHost, 0, nil)
		ing.Spec.Rules[0].HTTP.Paths = prefixPaths(paths...)
		return append(service(victimNS, victimPort), ing)
	}
	write(t, manifests, "10-victim.json", victim("/old")...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)})
	addr := p.Addresses(victimNS, "site")[0]

	// Ten Ingresses of 1,000 paths each (--max-paths-per-ingress), one group.
	huge := service(attackerNS, attackerPort)
	for k := 0; k < 10; k++ {
		ing := ingress(attackerNS, fmt.Sprintf("huge-%d", k), "huge.example", 5, map[string]string{annGroup: "huge"})
		paths := make([]string, 1000)
		for i := range paths {
			paths[i] = fmt.Sprintf("/p%d/%d", k, i)
		}
		ing.Spec.Rules[0].HTTP.Paths = prefixPaths(paths...)
		huge = append(huge, ing)
	}
	write(t, manifests, "20-huge.json", huge...)
	time.Sleep(150 * time.Millisecond) // past the loader's debounce: the huge apply is under way
	start := time.Now()
	write(t, manifests, "10-victim.json", victim("/old", "/new")...)
	for {
		code, reply, _, err := harness.Get(client, addr, p.HTTPPort, victimHost, "/new")
		if err == nil && code == http.StatusOK && reply.Service == victimEcho {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("the victim's new path is not served %v after its change (last: %d %v): the huge group holds it up", bound, code, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("victim's change served %v after its write, while a 10,000-path group was applied", time.Since(start).Round(time.Millisecond))
	hugeAddr := p.Addresses(attackerNS, "huge-0")[0]
	expectPath(t, p, hugeAddr, "huge.example", "/p9/999", attackerEcho)
}

func prefixPaths(paths ...string) []networkingv1.HTTPIngressPath {
	out := make([]networkingv1.HTTPIngressPath, len(paths))
	for i, path := range paths {
		out[i] = networkingv1.HTTPIngressPath{Path: path, PathType: &pathPrefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "app", Port: networkingv1.ServiceBackendPort{Number: 80}}}}
	}
	return out
}

// expectPath waits up to 10 s for host+path on addr to be answered by service.
func expectPath(t *testing.T, p *harness.Pier, addr, host, path, service string) {
	t.Helper()
	harness.WaitFor(t, 10*time.Second, host+path+" served by "+service, func() bool {
		code, reply, _, err := harness.Get(client, addr, p.HTTPPort, host, path)
		return err == nil && code == http.StatusOK && reply.Service == service
	})
}
