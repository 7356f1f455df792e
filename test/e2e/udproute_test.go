package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/harness"
)

// udpManifests: a Gateway with an HTTP listener (HAProxy) and UDP
// listeners (nftables) on one VIP and FIP: UDP on the HTTP listener's
// port number too, a UDPRoute to a Service of two UDP echo endpoints, and
// a UDPRoute naming the Service "echo;evil" on a listener of its own; and
// a Gateway of one UDP listener, which runs no HAProxy.
const udpManifests = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: web, namespace: demo}
spec:
  gatewayClassName: pier
  listeners:
  - {name: http, protocol: HTTP, port: 8080}
  - {name: dns, protocol: UDP, port: 8080}
  - {name: evil, protocol: UDP, port: 5399}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: udp-only, namespace: demo}
spec:
  gatewayClassName: pier
  listeners: [{name: dns, protocol: UDP, port: 53}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: dns, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: dns}, {name: udp-only}]
  rules: [{backendRefs: [{name: udp-echo, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: evil, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: evil}]
  rules: [{backendRefs: [{name: "echo;evil", port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: site, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: http}]
  rules: [{backendRefs: [{name: site, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: site, namespace: demo}
spec:
  ports: [{name: http, port: 80, targetPort: HTTPPORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: site-a, namespace: demo, labels: {kubernetes.io/service-name: site}}
addressType: IPv4
ports: [{name: http, port: HTTPPORT}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
---
apiVersion: v1
kind: Service
metadata: {name: udp-echo, namespace: demo}
spec:
  ports: [{name: dns, port: 53, protocol: UDP, targetPort: UDPPORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: udp-echo-a, namespace: demo, labels: {kubernetes.io/service-name: udp-echo}}
addressType: IPv4
ports: [{name: dns, port: UDPPORT, protocol: UDP}]
endpoints:
- {addresses: ["127.0.0.2"], conditions: {ready: true}}
- {addresses: ["127.0.0.3"], conditions: {ready: true}}
`

// startUDPEchoIn serves UDP on addr:port in namespace ns: each datagram
// comes back prefixed with name, so a reply says which endpoint it
// reached.
func startUDPEchoIn(t *testing.T, ns, addr string, port int, name string) {
	t.Helper()
	var pc net.PacketConn
	if err := netnsdo.Do(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(append([]byte(name+" "), buf[:n]...), from)
		}
	}()
}

// udpSayIn sends msg in one datagram from a new socket (a new flow) in ns
// to addr:port and returns the reply or the error.
func udpSayIn(ns, addr string, port int, msg string) (string, error) {
	var c net.Conn
	if err := netnsdo.Do(ns, func() error {
		var err error
		c, err = net.Dial("udp4", net.JoinHostPort(addr, strconv.Itoa(port)))
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

// getJSONIn reads pier's API at 127.0.0.1:8082 in ns into v.
func getJSONIn(ns, path string, v any) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := netnsdo.Do(ns, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	resp, err := client.Get("http://127.0.0.1:8082" + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// TestUDPRouteThroughPierRun runs `pier run` in a network namespace of
// its own with a Gateway of HTTP and UDP listeners: datagrams sent to the
// VIP and the FIP reach both UDP echo endpoints through nftables, while
// HAProxy answers HTTP on the same addresses and the same port number;
// an endpoint leaving the Service leaves the spread; the UDPRoute naming
// "echo;evil" gets ICMP port unreachable and its
// name reaches neither a file nor the ruleset; the UDP listener is
// Programmed once the load balancer serves; and when pier exits the
// ruleset is what it was before.
func TestUDPRouteThroughPierRun(t *testing.T) {
	ns := udpNetns(t, "e")
	httpPort := startEchoIn(t, ns)
	const udpPort = 5353
	startUDPEchoIn(t, ns, "127.0.0.2", udpPort, "a")
	startUDPEchoIn(t, ns, "127.0.0.3", udpPort, "b")

	dir := harness.ShortTempDir(t)
	m := strings.ReplaceAll(strings.ReplaceAll(udpManifests, "HTTPPORT", strconv.Itoa(httpPort)), "UDPPORT", strconv.Itoa(udpPort))
	harness.WriteFile(t, filepath.Join(dir, "udp.yaml"), m)
	before := run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset")
	stop, logs := startPierIn(t, ns, dir)

	var lb, udpOnly *model.LoadBalancer
	harness.WaitFor(t, 20*time.Second, "the Gateways' load balancers serve", func() bool {
		var list struct {
			Items []*model.LoadBalancer `json:"items"`
		}
		if getJSONIn(ns, "/loadbalancers", &list) != nil || len(list.Items) != 2 {
			return false
		}
		for _, l := range list.Items {
			if l.VIP == "" || l.FIP == "" || l.Status.State != model.StateActive {
				return false
			}
			switch l.Name {
			case "gateway:demo/web":
				lb = l
			case "gateway:demo/udp-only":
				udpOnly = l
			}
		}
		return lb != nil && udpOnly != nil
	})
	if lb.Provider != model.ProviderHAProxy {
		t.Fatalf("the Gateway's load balancer: provider %s", lb.Provider)
	}
	for _, addr := range []string{udpOnly.VIP, udpOnly.FIP} {
		if reply, err := udpSayIn(ns, addr, 53, "only"); err != nil || !strings.HasSuffix(reply, " only") {
			t.Errorf("the Gateway of one UDP listener, via %s:53: %q (%v)", addr, reply, err)
		}
	}
	for _, addr := range []string{lb.VIP, lb.FIP} {
		seen := map[string]int{}
		for i := 0; i < 40; i++ {
			msg := "hello " + strconv.Itoa(i)
			reply, err := udpSayIn(ns, addr, 8080, msg)
			name, rest, _ := strings.Cut(reply, " ")
			if err != nil || rest != msg {
				t.Fatalf("via %s:8080/udp: reply %q (%v)\n%s", addr, reply, err, logs.String())
			}
			seen[name]++
		}
		// Each new flow's endpoint is drawn at random (numgen): over 40
		// flows, each of two endpoints gets at least 5 but for odds of
		// about one in 10^6.
		if seen["a"] < 5 || seen["b"] < 5 {
			t.Errorf("via %s:8080/udp: datagrams per endpoint %v", addr, seen)
		}
		if got := getIn(ns, addr+":8080"); got != "echo-l4" {
			t.Errorf("HTTP through HAProxy on %s:8080/tcp beside UDP: %q", addr, got)
		}
	}
	// An endpoint leaving the Service leaves the table: every new flow
	// reaches the one left.
	harness.WriteFile(t, filepath.Join(dir, "udp.yaml"), strings.Replace(m, `
- {addresses: ["127.0.0.3"], conditions: {ready: true}}`, "", 1))
	harness.WaitFor(t, 10*time.Second, "20 flows in a row on the endpoint left", func() bool {
		for i := 0; i < 20; i++ {
			if reply, err := udpSayIn(ns, lb.VIP, 8080, "x"); err != nil || reply != "a x" {
				return false
			}
		}
		return true
	})
	// The table rejects datagrams to a listener without endpoints:
	// ICMP port unreachable to a remote client (ECONNREFUSED), and EPERM
	// to this one, whose datagram the output hook refuses before it
	// leaves.
	reply, err := udpSayIn(ns, lb.VIP, 5399, "hello")
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, syscall.EPERM) {
		t.Errorf("the listener of the UDPRoute naming \"echo;evil\": reply %q (%v), want it refused", reply, err)
	}
	harness.WaitFor(t, 10*time.Second, "the UDP listener Programmed", func() bool {
		var gw gwv1.Gateway
		if getJSONIn(ns, "/gateways/demo/web", &gw) != nil {
			return false
		}
		for _, l := range gw.Status.Listeners {
			if l.Name == "dns" {
				c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionProgrammed))
				return c != nil && c.Status == metav1.ConditionTrue && l.AttachedRoutes == 1 &&
					len(l.SupportedKinds) == 1 && l.SupportedKinds[0].Kind == model.KindUDPRoute
			}
		}
		return false
	})
	if rules := run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset"); strings.Contains(rules, "evil") {
		t.Errorf("the ruleset holds \"evil\":\n%s", rules)
	}
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".yaml") {
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), "echo;evil") {
				t.Errorf("%s holds \"echo;evil\"", path)
			}
		}
		return nil
	})
	stop()
	if after := run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset"); after != before {
		t.Fatalf("ruleset after pier exited:\n%s\nbefore:\n%s\npier logs:\n%s", after, before, logs.String())
	}
}

// udpNetns makes a network namespace of the test's own with loopback up,
// or skips (fails under CI) without root, nft, ip or haproxy.
func udpNetns(t *testing.T, suffix string) string {
	t.Helper()
	udpNetnsUsable(t)
	ns := "pudp-" + strconv.Itoa(os.Getpid()%100000) + "-" + suffix
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// udpNetnsUsable skips (fails under CI) without root, nft, ip or haproxy.
func udpNetnsUsable(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the UDPRoute e2e tests need root (nftables, network namespaces)")
		}
		t.Skip("the UDPRoute e2e tests need root (nftables, network namespaces); set CI=true to make this a failure")
	}
	for _, bin := range []string{"nft", "ip", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the UDPRoute e2e tests need %s (hack/deps.sh)", bin)
			}
			t.Skipf("the UDPRoute e2e tests need %s", bin)
		}
	}
}

// startPierIn runs `pier run -f dir` in ns, its API on 127.0.0.1:8082
// there; stop ends it (and runs at cleanup).
func startPierIn(t *testing.T, ns, dir string) (stop func(), logs *bytes.Buffer) {
	t.Helper()
	pier := exec.Command("ip", "netns", "exec", ns, harness.PierBin(t), "run", "-f", dir,
		"--state-dir", filepath.Join(dir, "state"), "--api-addr", "127.0.0.1:8082")
	logs = &bytes.Buffer{}
	pier.Stdout, pier.Stderr = logs, logs
	if err := pier.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			_ = pier.Process.Signal(os.Interrupt)
			_ = pier.Wait()
		}
	}
	t.Cleanup(stop)
	return stop, logs
}

// TestUDPRouteExample serves examples/gateway/udp.yaml (with
// gateway.yaml's GatewayClass) in a namespace of its own: port 53 of the
// Gateway's VIP answers UDP through nftables and TCP through HAProxy,
// each from the echo of its protocol.
func TestUDPRouteExample(t *testing.T) {
	ns := udpNetns(t, "x")
	class, err := os.ReadFile("../../examples/gateway/gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../examples/gateway/udp.yaml")
	if err != nil {
		t.Fatal(err)
	}
	startUDPEchoIn(t, ns, "127.0.0.1", 5353, "udp")
	startTCPEchoIn(t, ns, 5353, "tcp")
	dir := harness.ShortTempDir(t)
	first, _, _ := strings.Cut(string(class), "\n---\n")
	harness.WriteFile(t, filepath.Join(dir, "class.yaml"), first)
	harness.WriteFile(t, filepath.Join(dir, "udp.yaml"), string(example))
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
	if reply, err := udpSayIn(ns, lb.VIP, 53, "ping"); err != nil || reply != "udp ping" {
		t.Errorf("UDP via %s:53: %q (%v), want \"udp ping\"\n%s", lb.VIP, reply, err, logs.String())
	}
	if reply, err := tcpSayIn(ns, lb.VIP, 53, "ping"); err != nil || reply != "tcp ping" {
		t.Errorf("TCP via %s:53: %q (%v), want \"tcp ping\"\n%s", lb.VIP, reply, err, logs.String())
	}
}

// startTCPEchoIn serves raw TCP on 127.0.0.1:port of ns: each line comes
// back prefixed with name.
func startTCPEchoIn(t *testing.T, ns string, port int, name string) {
	t.Helper()
	var ln net.Listener
	if err := netnsdo.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, err := bufio.NewReader(c).ReadString('\n')
				if err == nil {
					_, _ = io.WriteString(c, name+" "+line)
				}
			}()
		}
	}()
}

// tcpSayIn sends line over a new connection from ns and returns the
// reply line.
func tcpSayIn(ns, addr string, port int, line string) (string, error) {
	var c net.Conn
	if err := netnsdo.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", net.JoinHostPort(addr, strconv.Itoa(port)), 2*time.Second)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(reply, "\n"), err
}
