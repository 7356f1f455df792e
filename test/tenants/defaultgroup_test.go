package tenants

import (
	"net"
	"strconv"
	"testing"

	"pier.dev/pier/test/harness"
)

// TestDefaultGroupOneAddress: with --default-load-balancer-group, two
// Ingresses of two namespaces that name no group answer on one address,
// each host with its own namespace's backend, as ingress-nginx answers
// every Ingress of the class on its address; without the flag each has
// its own address.
func TestDefaultGroupOneAddress(t *testing.T) {
	const otherHost = "other.example"
	for _, shared := range []bool{true, false} {
		name := "without the flag"
		if shared {
			name = "with the flag"
		}
		t.Run(name, func(t *testing.T) {
			manifests := harness.ShortTempDir(t)
			victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
			attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
			write(t, manifests, "00-class.json", ingressClass())
			write(t, manifests, "10-a.json", append(service(victimNS, victimPort), ingress(victimNS, "site", victimHost, 0, nil))...)
			write(t, manifests, "20-b.json", append(service(attackerNS, attackerPort), ingress(attackerNS, "site", otherHost, 1, nil))...)
			opts := harness.Options{Manifests: manifests, State: harness.ShortTempDir(t)}
			if shared {
				opts.ExtraArgs = []string{"--default-load-balancer-group=class"}
			}
			p := harness.StartPier(t, opts)
			a, b := p.Addresses(victimNS, "site"), p.Addresses(attackerNS, "site")
			if sameAddresses(a, b) != shared {
				t.Fatalf("addresses %v and %v: want them the same %v", a, b, shared)
			}
			for _, tc := range []struct {
				addrs         []string
				host, service string
			}{{a, victimHost, victimEcho}, {b, otherHost, attackerEcho}} {
				addr := net.JoinHostPort(tc.addrs[0], strconv.Itoa(p.HTTPPort))
				if code, svc := rawGet(t, addr, "GET / HTTP/1.1\r\nHost: "+tc.host+"\r\n"); code != 200 || svc != tc.service {
					t.Errorf("%s on %s: %d from %q, want 200 from %q", tc.host, addr, code, svc, tc.service)
				}
			}
		})
	}
}
