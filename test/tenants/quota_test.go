package tenants

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// The global caps were first come, first served: the attacker's 20
// Ingresses filled --max-ingresses 20, and the victim's Ingress, newer,
// was refused (TooManyIngresses). With the default quota (a tenth of the
// cap) the attacker's namespace gets 2, its newer ones are refused with
// QuotaExceeded naming the flag, and the victim is served.
func TestNamespaceQuotaKeepsTheIngressCapForOthers(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	write(t, manifests, "00-class.json", ingressClass())
	attack := service(attackerNS, attackerPort)
	for i := range 20 {
		attack = append(attack, ingress(attackerNS, fmt.Sprintf("a%02d", i), fmt.Sprintf("a%02d.attacker.example", i), i, nil))
	}
	write(t, manifests, "10-attack.json", attack...)
	write(t, manifests, "20-victim.json", append(service(victimNS, victimPort), ingress(victimNS, "site", victimHost, 30, nil))...)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t),
		ExtraArgs: []string{"--max-ingresses", "20"}})

	var addrs []string
	harness.WaitFor(t, 15*time.Second, "the victim's Ingress served", func() bool {
		ing, err := p.Ingress(victimNS, "site")
		if err != nil || len(ing.Status.LoadBalancer.Ingress) == 0 {
			return false
		}
		addrs = nil
		for _, a := range ing.Status.LoadBalancer.Ingress {
			addrs = append(addrs, a.IP)
		}
		return true
	})
	for _, a := range addrs {
		expectServed(t, p, a, victimHost, victimEcho, 3)
	}
	for _, name := range []string{"a00", "a01"} {
		expectServed(t, p, p.Addresses(attackerNS, name)[0], name+".attacker.example", attackerEcho, 1)
	}
	pr := waitProblem(t, p, attackerNS, "a02", "QuotaExceeded")
	if !strings.Contains(pr.Message, "--max-ingresses-per-namespace") {
		t.Errorf("the refusal %q does not name the flag", pr.Message)
	}
	waitProblem(t, p, attackerNS, "a19", "QuotaExceeded")
}

// Six HTTPRoutes of the attacker's filled --max-httproutes 6, and the
// victim's route on its own Gateway was refused. With the default quota
// the attacker's namespace gets one route; the victim's is accepted and
// served on its Gateway's addresses.
func TestNamespaceQuotaKeepsTheHTTPRouteCapForOthers(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	port := harness.FreePort(t)
	write(t, manifests, "00-svc.json", append(service(attackerNS, attackerPort), service(victimNS, victimPort)...)...)
	var b strings.Builder
	b.WriteString(gatewayClassYAML + gatewayYAML(attackerNS, "agw", port))
	for i := range 6 {
		b.WriteString(routeYAML(attackerNS, fmt.Sprintf("r%d", i), "agw", fmt.Sprintf("r%d.attacker.example", i)))
	}
	harness.WriteFile(t, filepath.Join(manifests, "10-attack.yaml"), b.String())
	harness.WriteFile(t, filepath.Join(manifests, "20-victim.yaml"),
		gatewayYAML(victimNS, "vgw", port)+routeYAML(victimNS, "site", "vgw", victimHost))
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t),
		ExtraArgs: []string{"--max-httproutes", "6"}})

	lb := waitGatewayLB(t, p, victimNS, "vgw")
	harness.WaitFor(t, 15*time.Second, "the victim's route served on its Gateway", func() bool {
		code, reply, _, err := harness.Get(client, lb.VIP, port, victimHost, "/")
		return err == nil && code == http.StatusOK && reply.Service == victimEcho
	})
	if got := routeAccepted(t, p, victimNS, "site"); got != "True/Accepted" {
		t.Errorf("the victim's route: Accepted %s", got)
	}
	if got := routeAccepted(t, p, attackerNS, "r0"); got != "True/Accepted" {
		t.Errorf("the attacker's first route: Accepted %s", got)
	}
	for i := 1; i < 6; i++ {
		name := fmt.Sprintf("r%d", i)
		if got := routeAccepted(t, p, attackerNS, name); !strings.HasPrefix(got, "False/QuotaExceeded: ") ||
			!strings.Contains(got, "--max-httproutes-per-namespace") {
			t.Errorf("the attacker's %s: Accepted %s, want False/QuotaExceeded naming the flag", name, got)
		}
	}
}

// 32 Gateways of one namespace drained a public pool of 14 addresses,
// and the victim's Gateway got no floating IP (AddressPoolExhausted).
// With the default quota (a quarter of the pool) the attacker's
// namespace holds 4; the victim's Gateway gets its floating IP and
// serves on it.
func TestNamespaceQuotaKeepsThePublicPoolForOthers(t *testing.T) {
	manifests := harness.ShortTempDir(t)
	victimPort := harness.StartEcho(t, victimEcho, "victim-pod")
	attackerPort := harness.StartEcho(t, attackerEcho, "attacker-pod")
	port := harness.FreePort(t)
	write(t, manifests, "00-svc.json", append(service(attackerNS, attackerPort), service(victimNS, victimPort)...)...)
	var b strings.Builder
	b.WriteString(gatewayClassYAML)
	for i := range 32 {
		b.WriteString(gatewayYAML(attackerNS, fmt.Sprintf("g%02d", i), port))
	}
	harness.WriteFile(t, filepath.Join(manifests, "10-attack.yaml"), b.String())
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: harness.ShortTempDir(t),
		ExtraArgs: []string{"--public-pool", "127.20.0.0/28"}})
	attackerFIPs := func() int {
		n := 0
		for _, l := range loadBalancers(t, p) {
			if l.FIP != "" && l.Sources[0].Namespace == attackerNS && l.Status.State == model.StateActive {
				n++
			}
		}
		return n
	}
	harness.WaitFor(t, 20*time.Second, "the attacker's Gateways served", func() bool { return attackerFIPs() >= 4 })
	// The victim comes later, as a newcomer to a full pool does.
	harness.WriteFile(t, filepath.Join(manifests, "20-victim.yaml"),
		gatewayYAML(victimNS, "vgw", port)+routeYAML(victimNS, "site", "vgw", victimHost))

	lb := waitGatewayLB(t, p, victimNS, "vgw")
	if lb.FIP == "" {
		t.Fatalf("the victim's Gateway has no floating IP: %+v", lb)
	}
	harness.WaitFor(t, 15*time.Second, "the victim's route served on its floating IP", func() bool {
		code, reply, _, err := harness.Get(client, lb.FIP, port, victimHost, "/")
		return err == nil && code == http.StatusOK && reply.Service == victimEcho
	})
	if n := attackerFIPs(); n != 4 {
		t.Errorf("the attacker's namespace holds %d floating IPs, want 4 (a quarter of 14)", n)
	}
	// The Gateways refused say why (Programmed=False, NoResources, as
	// the Gateway API names it) and which flag.
	refused := 0
	for i := range 32 {
		for _, pr := range gatewayState(t, p, attackerNS, fmt.Sprintf("g%02d", i)).Problems {
			if strings.Contains(pr.Message, "--max-public-ips-per-namespace") {
				refused++
			}
		}
	}
	if refused != 28 {
		t.Errorf("%d of the attacker's Gateways refused naming --max-public-ips-per-namespace, want 28", refused)
	}
}

const gatewayClassYAML = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
`

func gatewayYAML(ns, name string, port int) string {
	return "---\napiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: " + name + ", namespace: " + ns + "}\n" +
		"spec:\n  gatewayClassName: pier\n  listeners: [{name: http, protocol: HTTP, port: " + strconv.Itoa(port) + "}]\n"
}

// routeYAML is an HTTPRoute for host on Gateway gw of its namespace, to
// the namespace's Service app.
func routeYAML(ns, name, gw, host string) string {
	return "---\napiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: " + name + ", namespace: " + ns + "}\n" +
		"spec:\n  parentRefs: [{name: " + gw + "}]\n  hostnames: [" + host + "]\n  rules: [{backendRefs: [{name: app, port: 80}]}]\n"
}

func loadBalancers(t *testing.T, p *harness.Pier) []*model.LoadBalancer {
	t.Helper()
	var list struct {
		Items []*model.LoadBalancer `json:"items"`
	}
	getJSON(t, p, "/loadbalancers", &list)
	return list.Items
}

// waitGatewayLB waits for the load balancer of Gateway ns/name to be
// active and returns it.
func waitGatewayLB(t *testing.T, p *harness.Pier, ns, name string) *model.LoadBalancer {
	t.Helper()
	var found *model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "Gateway "+ns+"/"+name+" served", func() bool {
		for _, lb := range loadBalancers(t, p) {
			if s := lb.Sources; len(s) > 0 && s[0].Kind == model.KindGateway && s[0].Namespace == ns && s[0].Name == name &&
				lb.VIP != "" && lb.Status.State == model.StateActive {
				found = lb
				return true
			}
		}
		return false
	})
	return found
}

func gatewayState(t *testing.T, p *harness.Pier, ns, name string) api.GatewayResponse {
	t.Helper()
	var g api.GatewayResponse
	getJSON(t, p, "/gateways/"+ns+"/"+name, &g)
	return g
}

// routeAccepted is the Accepted condition of the route's first parent,
// "Status/Reason: message", waiting for pier to have one.
func routeAccepted(t *testing.T, p *harness.Pier, ns, name string) string {
	t.Helper()
	var got string
	harness.WaitFor(t, 15*time.Second, "a status of HTTPRoute "+ns+"/"+name, func() bool {
		var r api.HTTPRouteResponse
		getJSON(t, p, "/httproutes/"+ns+"/"+name, &r)
		if r.HTTPRoute == nil || len(r.Status.Parents) == 0 {
			return false
		}
		for _, c := range r.Status.Parents[0].Conditions {
			if c.Type == "Accepted" {
				got = string(c.Status) + "/" + c.Reason
				if c.Message != "" {
					got += ": " + c.Message
				}
				return true
			}
		}
		return false
	})
	return got
}

func getJSON(t *testing.T, p *harness.Pier, path string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + p.API + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return // not there yet: out stays empty
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}
