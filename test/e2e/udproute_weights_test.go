package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/harness"
)

// udpWeightManifests: the upstream suite's UDPRouteWeightedRouting shape,
// a UDP-only Gateway whose UDPRoute sends to three Services weighted
// 70/30/0; the first has two endpoints (its 70 shared 35/35), the others
// one each.
const udpWeightManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: weighted, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: udp, protocol: UDP, port: 8080}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: weighted, namespace: demo}
spec:
  parentRefs: [{name: weighted}]
  rules:
  - backendRefs:
    - {name: v1, port: 8080, weight: 70}
    - {name: v2, port: 8080, weight: 30}
    - {name: v3, port: 8080, weight: 0}
` + udpWeightBackend + `V2ENDPOINTS`

// udpWeightBackend: the three Services and the endpoints of v1 and v3;
// v2's endpoint slice comes after it (V2ENDPOINTS).
const udpWeightBackend = `---
apiVersion: v1
kind: Service
metadata: {name: v1, namespace: demo}
spec: {ports: [{name: udp, port: 8080, protocol: UDP, targetPort: 5353}]}
---
apiVersion: v1
kind: Service
metadata: {name: v2, namespace: demo}
spec: {ports: [{name: udp, port: 8080, protocol: UDP, targetPort: 5353}]}
---
apiVersion: v1
kind: Service
metadata: {name: v3, namespace: demo}
spec: {ports: [{name: udp, port: 8080, protocol: UDP, targetPort: 5353}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v1-a, namespace: demo, labels: {kubernetes.io/service-name: v1}}
addressType: IPv4
ports: [{name: udp, port: 5353, protocol: UDP}]
endpoints:
- {addresses: ["127.0.0.2"], conditions: {ready: true}}
- {addresses: ["127.0.0.3"], conditions: {ready: true}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v3-a, namespace: demo, labels: {kubernetes.io/service-name: v3}}
addressType: IPv4
ports: [{name: udp, port: 5353, protocol: UDP}]
endpoints: [{addresses: ["127.0.0.5"], conditions: {ready: true}}]
`

const udpWeightV2 = `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: v2-a, namespace: demo, labels: {kubernetes.io/service-name: v2}}
addressType: IPv4
ports: [{name: udp, port: 5353, protocol: UDP}]
endpoints: [{addresses: ["127.0.0.4"], conditions: {ready: true}}]
`

// udpWeightFlows is how many flows each round sends: with shares of 0.7
// and 0.3 one standard deviation is about 1 point, so ±5 points fail a
// correct table about once in 10^6 runs.
const udpWeightFlows = 2000

// TestUDPRouteWeightsThroughPierRun runs `pier run` in a network
// namespace of its own with a UDPRoute weighted 70/30/0 and sends 2,000
// flows (a new socket, so a new source port and a new conntrack entry,
// each): the first Service gets 70±5 percent of them (35±5 each of its
// endpoints), the second 30±5, the one of weight 0 none. Then the second
// Service loses its endpoint: the spec's UDPRouteRule.backendRefs wants
// its share refused, not given to the first, so 30±5 percent of the new
// flows are refused (EPERM: the output hook drops this host's datagram)
// and the rest reach the first Service.
func TestUDPRouteWeightsThroughPierRun(t *testing.T) {
	ns := udpWeightNetns(t)
	for i, name := range []string{"v1a", "v1b", "v2", "v3"} {
		startUDPEchoIn(t, ns, "127.0.0."+strconv.Itoa(i+2), 5353, name)
	}
	dir := harness.ShortTempDir(t)
	harness.WriteFile(t, filepath.Join(dir, "udp.yaml"), strings.Replace(udpWeightManifests, "V2ENDPOINTS", udpWeightV2, 1))
	_, logs := startPierIn(t, ns, dir)
	var lb *model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "the Gateway's load balancer serves", func() bool {
		var list struct {
			Items []*model.LoadBalancer `json:"items"`
		}
		if getJSONIn(ns, "/loadbalancers", &list) != nil || len(list.Items) != 1 {
			return false
		}
		lb = list.Items[0]
		return lb.VIP != "" && lb.Status.State == model.StateActive
	})

	got := udpWeightRound(t, ns, lb.VIP, 20000)
	t.Logf("70/30/0 over %d flows: %v", udpWeightFlows, got)
	share := func(names ...string) float64 {
		n := 0
		for _, name := range names {
			n += got[name]
		}
		return 100 * float64(n) / udpWeightFlows
	}
	for _, want := range []struct {
		names []string
		pct   float64
	}{{[]string{"v1a", "v1b"}, 70}, {[]string{"v1a"}, 35}, {[]string{"v1b"}, 35}, {[]string{"v2"}, 30}} {
		if s := share(want.names...); s < want.pct-5 || s > want.pct+5 {
			t.Errorf("%v: %.1f%% of the flows, want %.0f±5: %v\n%s", want.names, s, want.pct, got, logs.String())
		}
	}
	if got["v3"] != 0 || got["error"] != 0 {
		t.Fatalf("the Service of weight 0 answered %d flows, %d failed: %v", got["v3"], got["error"], got)
	}

	// v2 loses its endpoint: its 30 of 100 are refused.
	harness.WriteFile(t, filepath.Join(dir, "udp.yaml"), strings.Replace(udpWeightManifests, "V2ENDPOINTS", "", 1))
	harness.WaitFor(t, 10*time.Second, "a flow refused", func() bool {
		_, err := udpSayIn(ns, lb.VIP, 8080, "x")
		return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ECONNREFUSED)
	})
	got = udpWeightRound(t, ns, lb.VIP, 30000)
	t.Logf("70/30 with no endpoint for the 30, over %d flows: %v", udpWeightFlows, got)
	if s := share("refused"); s < 25 || s > 35 {
		t.Errorf("%.1f%% of the flows refused, want 30±5: %v", s, got)
	}
	if s := share("v1a", "v1b"); s < 65 || s > 75 {
		t.Errorf("v1: %.1f%% of the flows, want 70±5 (the refused share is not given to it): %v", s, got)
	}
	if got["v2"] != 0 || got["v3"] != 0 || got["error"] != 0 {
		t.Errorf("v2 (no endpoint) %d, v3 (weight 0) %d, failed %d: %v", got["v2"], got["v3"], got["error"], got)
	}
}

// udpWeightRound sends udpWeightFlows flows to addr:8080, from source
// ports first, first+1, ..., and counts the replies by endpoint name, the
// refused ("refused") and the other failures ("error"). Each round has
// ports of its own: a flow from a port an earlier round used would find
// that flow's conntrack entry (UDP keeps one 30 seconds) and its NAT
// binding rather than the table.
func udpWeightRound(t *testing.T, ns, addr string, first int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := range udpWeightFlows {
		msg := "flow " + strconv.Itoa(i)
		reply, err := udpSayFromIn(ns, first+i, addr, 8080, msg)
		name, rest, _ := strings.Cut(reply, " ")
		switch {
		case errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.ECONNREFUSED):
			got["refused"]++
		case err != nil || rest != msg:
			got["error"]++
		default:
			got[name]++
		}
	}
	return got
}

// udpWeightNetns is udpNetns under a name of this test's own.
func udpWeightNetns(t *testing.T) string {
	t.Helper()
	udpNetnsUsable(t)
	ns := "pier-udpw-" + strconv.Itoa(os.Getpid()%100000)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// udpSayFromIn is udpSayIn from source port from.
func udpSayFromIn(ns string, from int, addr string, port int, msg string) (string, error) {
	var c *net.UDPConn
	if err := netnsdo.Do(ns, func() error {
		var err error
		c, err = net.DialUDP("udp4", &net.UDPAddr{Port: from}, &net.UDPAddr{IP: net.ParseIP(addr), Port: port})
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}
