package tenants

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/test/harness"
)

// sharedTLS lets victim and attacker share the group "tls": the
// certificate attack needs a shared load balancer, which an administrator
// must now allow.
var sharedTLS = "--shared-load-balancer=tls=" + victimNS + "," + attackerNS

// tlsVictim starts pier with the victim in group "tls" serving
// victim.example with an RSA certificate (HAProxy prefers ECDSA when both
// match, so an attacker's ECDSA certificate would win a tie).
func tlsVictimOpts(t *testing.T) (p *harness.Pier, manifests string, cert pemPair, addrs []string, attackerPort int, o harness.Options, victimPort int) {
	t.Helper()
	manifests = harness.ShortTempDir(t)
	victimPort = harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort = harness.StartEcho(t, attackerEcho, "attacker-pod")
	cert = makeCert(t, 2048, victimHost)
	write(t, manifests, "00-class.json", ingressClass())
	objs := append(service(victimNS, victimPort), tlsSecret(victimNS, "v-tls", cert),
		withTLS(ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "tls"}),
			networkingv1.IngressTLS{Hosts: []string{victimHost}, SecretName: "v-tls"}))
	write(t, manifests, "10-victim.json", objs...)
	o = harness.Options{Manifests: manifests, State: harness.ShortTempDir(t), ExtraArgs: []string{sharedTLS}}
	p = harness.StartPier(t, o)
	o.API, o.HTTPPort, o.HTTPSPort = p.API, p.HTTPPort, p.HTTPSPort
	addrs = p.Addresses(victimNS, "site")
	for _, a := range addrs {
		harness.WaitFor(t, 10*time.Second, "HTTPS on "+a, func() bool {
			_, err := servedCert(a, p.HTTPSPort, victimHost)
			return err == nil
		})
		checkCert(t, a, p.HTTPSPort, victimHost, cert, "the victim")
	}
	return p, manifests, cert, addrs, attackerPort, o, victimPort
}

// In a group shared with the victim, the attacker's TLS
// entry names victim.example with an ECDSA certificate, and a second
// entry has no hosts. Clients asking for victim.example, or for a name
// nobody serves, must still get the victim's certificate.
func TestCertificateHijack(t *testing.T) {
	p, manifests, victimCert, addrs, attackerPort, _, victimPort := tlsVictimOpts(t)
	named := makeCert(t, 0, victimHost, "attacker.example")
	hostless := makeCert(t, 0, victimHost, "nomatch.example")
	write(t, manifests, "20-attack.json", append(service(attackerNS, attackerPort),
		tlsSecret(attackerNS, "a-tls", named), tlsSecret(attackerNS, "any-tls", hostless),
		withTLS(ingress(attackerNS, "evil", "attacker.example", 5, map[string]string{annGroup: "tls"}),
			networkingv1.IngressTLS{Hosts: []string{victimHost, "attacker.example"}, SecretName: "a-tls"},
			networkingv1.IngressTLS{SecretName: "any-tls"}))...)
	if got := p.Addresses(attackerNS, "evil"); !sameAddresses(got, addrs) {
		t.Fatalf("the attacker is not in the shared group (%v vs %v): the test proves nothing", got, addrs)
	}
	for _, a := range addrs {
		// The attacker's own host gets its certificate: the change applied.
		harness.WaitFor(t, 10*time.Second, "the attacker's certificate on "+a, func() bool {
			got, err := servedCert(a, p.HTTPSPort, "attacker.example")
			return err == nil && string(got) == string(named.der)
		})
		for i := 0; i < 5; i++ {
			checkCert(t, a, p.HTTPSPort, victimHost, victimCert, "the victim")
			checkCert(t, a, p.HTTPSPort, "nomatch.example", victimCert, "the owner (default)")
		}
		checkHTTPS(t, p, a, victimHost, victimEcho)
	}
	pr := waitProblem(t, p, attackerNS, "evil", "TLSHostConflict")
	t.Logf("refused: %s", pr.Message)

	// The victim drops its TLS entry: the attacker's certificates are the
	// only ones left, and none may become the default for victim.example.
	write(t, manifests, "10-victim.json", append(service(victimNS, victimPort),
		ingress(victimNS, "site", victimHost, 0, map[string]string{annGroup: "tls"}))...)
	for _, a := range addrs {
		harness.WaitFor(t, 10*time.Second, "no certificate for victim.example on "+a, func() bool {
			_, err := servedCert(a, p.HTTPSPort, victimHost)
			return err != nil
		})
		for _, sni := range []string{victimHost, "nomatch.example", ""} {
			if got, err := servedCert(a, p.HTTPSPort, sni); err == nil {
				c, _ := x509.ParseCertificate(got)
				t.Errorf("SNI %q on %s got the attacker's certificate %s %v", sni, a, c.Subject, c.DNSNames)
			}
		}
		checkCert(t, a, p.HTTPSPort, "attacker.example", named, "the attacker")
	}
}

// The attacker's Secret holds a 1024-bit RSA key, which Go
// accepts and HAProxy (OpenSSL security level 2) refuses. Only that entry
// is dropped, with InvalidTLS; the shared load balancer keeps applying
// changes, and starts again after a restart.
func TestCertificateOpenSSLRefuses(t *testing.T) {
	p, manifests, victimCert, addrs, attackerPort, o, _ := tlsVictimOpts(t)
	weak := makeCert(t, 1024, "attacker.example")
	write(t, manifests, "20-attack.json", append(service(attackerNS, attackerPort),
		tlsSecret(attackerNS, "weak-tls", weak),
		withTLS(ingress(attackerNS, "weak", "attacker.example", 5, map[string]string{annGroup: "tls"}),
			networkingv1.IngressTLS{Hosts: []string{"attacker.example"}, SecretName: "weak-tls"}))...)
	// The load balancer still applies: the attacker's HTTP route and a
	// later change of the victim's namespace are served.
	write(t, manifests, "30-later.json",
		ingress(victimNS, "later", "later.example", 9, map[string]string{annGroup: "tls"}))
	for _, a := range addrs {
		for host, echo := range map[string]string{"attacker.example": attackerEcho, "later.example": victimEcho} {
			harness.WaitFor(t, 10*time.Second, host+" served on "+a, func() bool {
				code, reply, _, err := harness.Get(client, a, p.HTTPPort, host, "/")
				return err == nil && code == 200 && reply.Service == echo
			})
		}
		checkCert(t, a, p.HTTPSPort, victimHost, victimCert, "the victim")
		checkHTTPS(t, p, a, victimHost, victimEcho)
	}
	pr := waitProblem(t, p, attackerNS, "weak", "InvalidTLS")
	if !strings.Contains(pr.Message, "1024 bits") {
		t.Errorf("InvalidTLS does not say why: %s", pr.Message)
	}
	if n := p.Metric("pier_haproxy_config_rejected_total"); n != 0 {
		t.Errorf("haproxy -c refused %v configurations", n)
	}
	// A restart of pier, and so of HAProxy, starts from these files.
	p.Stop()
	p = harness.StartPier(t, o)
	for _, a := range addrs {
		harness.WaitFor(t, 15*time.Second, "HTTPS again on "+a, func() bool {
			_, err := servedCert(a, p.HTTPSPort, victimHost)
			return err == nil
		})
		checkCert(t, a, p.HTTPSPort, victimHost, victimCert, "the victim")
		checkHTTPS(t, p, a, victimHost, victimEcho)
	}
}

// checkHTTPS sends one HTTPS request for host and wants service's answer.
func checkHTTPS(t *testing.T, p *harness.Pier, addr, host, service string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{ServerName: host, InsecureSkipVerify: true}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+net.JoinHostPort(addr, strconv.Itoa(p.HTTPSPort))+"/", nil)
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("HTTPS %s on %s: %v", host, addr, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("HTTPS %s on %s: status %d", host, addr, resp.StatusCode)
	}
}
