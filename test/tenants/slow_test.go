package tenants

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// One tenant's huge group must not hold up another
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

// A check that runs long (HAProxy hashes every user of every list while
// it checks a shard's set) held the shard's lane to its end even after
// the load balancer that caused it was deleted: every change of the
// other load balancers there waited behind it, up to process.CheckTimeout
// (30 s), then behind the reload that parsed the same lists again. The
// attacker's group of ten Ingresses, each with a list of four users at
// bcrypt cost 12 (each list within htpasswd.MaxListCost), makes the
// check of the one shard (--haproxy-processes 1) take several seconds;
// the attacker deletes it while it runs, and the victim's change in the
// same shard must serve within a bound far below that: the deletion
// kills the check.
func TestDeletedLoadBalancerCancelsItsCheck(t *testing.T) {
	const (
		lists = 10
		bound = 4 * time.Second
	)
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	victim := func(paths ...string) []runtime.Object {
		ing := ingress(victimNS, "site", victimHost, 0, nil)
		ing.Spec.Rules[0].HTTP.Paths = prefixPaths(paths...)
		return append(service(victimNS, victimPort), ing)
	}
	write(t, manifests, "10-victim.json", victim("/old")...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--haproxy-processes", "1"}})
	addr := p.Addresses(victimNS, "site")[0]
	expectPath(t, p, addr, victimHost, "/old", victimEcho)

	// cost12 is a bcrypt hash at cost 12, the most encode admits: HAProxy
	// spends about 0.2 s on each while it checks or loads the set.
	const cost12 = "$2y$12$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	attack := service(attackerNS, attackerPort)
	for k := range lists {
		name := fmt.Sprintf("slow-%d", k)
		var users strings.Builder
		for u := range 4 {
			fmt.Fprintf(&users, "u%d:%s\n", u, cost12)
		}
		attack = append(attack, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Namespace: attackerNS, Name: name},
			Type:       corev1.SecretTypeOpaque, Data: map[string][]byte{"auth": []byte(users.String())},
		}, ingress(attackerNS, name, "slow.example", 5+k, map[string]string{annGroup: "slow",
			"nginx.ingress.kubernetes.io/auth-type": "basic", "nginx.ingress.kubernetes.io/auth-secret": name}))
		attack[len(attack)-1].(*networkingv1.Ingress).Spec.Rules[0].HTTP.Paths[0].Path = "/" + name
	}
	write(t, manifests, "20-attack.json", attack...)
	var pid int
	harness.WaitFor(t, 15*time.Second, "a haproxy -c of the attacker's set under way", func() bool {
		pid = checkUnderWay(state)
		return pid != 0
	})
	time.Sleep(300 * time.Millisecond) // well into the check

	start := time.Now()
	if err := os.Remove(filepath.Join(manifests, "20-attack.json")); err != nil {
		t.Fatal(err)
	}
	write(t, manifests, "10-victim.json", victim("/old", "/new")...)
	for {
		code, reply, _, err := harness.Get(client, addr, p.HTTPPort, victimHost, "/new")
		if err == nil && code == http.StatusOK && reply.Service == victimEcho {
			break
		}
		if time.Since(start) > bound {
			t.Fatalf("the victim's new path is not served %v after the attacker's deletion (last: %d %v): the check of a deleted load balancer holds the shard", bound, code, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("victim's change served %v after the attacker deleted its slow group", time.Since(start).Round(time.Millisecond))
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("the check of the deleted load balancer (pid %d) still runs", pid)
	}
	expectPath(t, p, addr, victimHost, "/old", victimEcho)
}

// checkUnderWay is the pid of a `haproxy -c` of a set below state, or 0.
func checkUnderWay(state string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) > 2 && filepath.Base(args[0]) == "haproxy" && args[1] == "-c" && strings.Contains(string(b), state) {
			return pid
		}
	}
	return 0
}
