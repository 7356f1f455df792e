package tenants

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/translate"
	"pier.dev/pier/test/harness"
)

// worstRegex is the i-th of the costliest use-regex paths pier accepts:
// 1,024 ways for the counted part (the cap), six unbounded repetitions,
// and a tail a request can leave out ("cd") while holding the last
// literal PCRE2 looks for first ("d"). Without the match limit each
// costs HAProxy milliseconds on the request worstRequest makes.
func worstRegex(i int) string {
	return "/(a?){10}a{10}.*.*.*.*.*.*c" + strings.Repeat("c", i) + "d"
}

// worstRequest is a path every worstRegex backtracks on in full and
// none matches, with a random tail (HAProxy caches a lookup's result).
func worstRequest() string {
	return "/" + strings.Repeat("a", 10) + strings.Repeat("b", 400) + "d" + fmt.Sprint(rand.Uint64())
}

func regexPaths(exprs ...string) []networkingv1.HTTPIngressPath {
	out := prefixPaths(exprs...)
	for i := range out {
		out[i].PathType = &pathImplementation
	}
	return out
}

var pathImplementation = networkingv1.PathTypeImplementationSpecific

// TestRegexCostBounded: one tenant's accepted worst-case regular
// expressions, the cap's number of them, in the HAProxy process the
// victim's load balancer shares (--haproxy-processes 1), cost each
// attack request milliseconds, and the victim's probes keep answering
// fast; the expressions of the review's attack, and paths past the cap,
// are refused with their reason.
func TestRegexCostBounded(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort), ingress(victimNS, "site", victimHost, 0, nil))...)

	regex := map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true"}
	worst := ingress(attackerNS, "worst", "evil.example", 1, regex)
	var exprs []string
	for i := 0; i < translate.DefaultMaxRegexPathsPerLoadBalancer; i++ {
		exprs = append(exprs, worstRegex(i))
	}
	worst.Spec.Rules[0].HTTP.Paths = regexPaths(exprs...)
	attack := ingress(attackerNS, "attack", "attack.example", 2, regex)
	attack.Spec.Rules[0].HTTP.Paths = regexPaths("/(a?){32}a{32}")
	// Same load balancer (a group), one path past the cap.
	worst.Annotations = map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true", annGroup: "evil"}
	more := ingress(attackerNS, "more", "more.example", 3, map[string]string{"nginx.ingress.kubernetes.io/use-regex": "true", annGroup: "evil"})
	more.Spec.Rules[0].HTTP.Paths = regexPaths("/x/(.*)")
	write(t, manifests, "20-attacker.json", append(service(attackerNS, attackerPort), []runtime.Object{worst, attack, more}...)...)

	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t),
		ExtraArgs: []string{"--haproxy-processes", "1"}})
	victimAddr := p.Addresses(victimNS, "site")[0]
	evilAddr := p.Addresses(attackerNS, "worst")[0]
	expectServed(t, p, victimAddr, victimHost, victimEcho, 1)
	expectPath(t, p, evilAddr, "evil.example", "/aaaaaaaaaaxcd", attackerEcho)

	for name, want := range map[string]string{"attack": "ways", "more": "TooManyRegexPaths"} {
		harness.WaitFor(t, 15*time.Second, name+" refused with "+want, func() bool {
			return strings.Contains(problemList(p, attackerNS, name), want)
		})
		t.Logf("%s: %s", name, problemList(p, attackerNS, name))
	}

	// The attack: two clients send worst-case requests for 3 s while the
	// victim is probed.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var attackMax time.Duration
	attacks := 0
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				code, _, _, err := harness.Get(client, evilAddr, p.HTTPPort, "evil.example", worstRequest())
				took := time.Since(start)
				mu.Lock()
				attacks++
				attackMax = max(attackMax, took)
				mu.Unlock()
				if err != nil || code != http.StatusNotFound {
					t.Errorf("attack request: %d %v, want 404", code, err)
					return
				}
			}
		}()
	}
	var probeMax time.Duration
	probes := 0
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); probes++ {
		start := time.Now()
		code, reply, _, err := harness.Get(client, victimAddr, p.HTTPPort, victimHost, "/")
		probeMax = max(probeMax, time.Since(start))
		if err != nil || code != http.StatusOK || reply.Service != victimEcho {
			t.Errorf("victim probe: %d %q %v", code, reply.Service, err)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	t.Logf("%d attack requests, slowest %v; %d victim probes, slowest %v", attacks, attackMax.Round(time.Microsecond), probes, probeMax.Round(time.Microsecond))
	// Measured about 3-10 ms per attack request with the limit, and up to
	// 350 ms for a victim's probe when CI runs other suites beside this
	// one; without the limit an attack request takes 2 s and HAProxy's
	// watchdog aborts the shard, so a second separates the two.
	if attackMax > time.Second {
		t.Errorf("an attack request took %v: the match limit does not bound it", attackMax)
	}
	if probeMax > time.Second {
		t.Errorf("a victim probe took %v while the attack ran", probeMax)
	}
}
