package badinput

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
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

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/harness"
)

// A Gateway's UDP listeners are programmed into nftables, so this bench
// runs a `pier run` of its own in a network namespace of its own (the
// shared bench's pier runs in the host's, whose ruleset a test must not
// touch).
const udpVictim = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: victim}
spec:
  gatewayClassName: pier
  listeners: [{name: dns, protocol: UDP, port: 5300}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: dns, namespace: victim}
spec:
  parentRefs: [{name: gw}]
  rules: [{backendRefs: [{name: app, port: 53}]}]
---
apiVersion: v1
kind: Service
metadata: {name: app, namespace: victim}
spec:
  ports: [{name: dns, port: 53, protocol: UDP, targetPort: 5353}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: app-a, namespace: victim, labels: {kubernetes.io/service-name: app}}
addressType: IPv4
ports: [{name: dns, port: 5353, protocol: UDP}]
endpoints: [{addresses: ["127.0.0.2"], conditions: {ready: true}}]
`

// udpAttack: one Gateway of UDP listeners, one hostile UDPRoute each, and
// a listener whose name carries ";evil".
const udpAttack = `apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: evil}
spec:
  gatewayClassName: pier
  listeners:
  - {name: u1, protocol: UDP, port: 5401}
  - {name: u2, protocol: UDP, port: 5402}
  - {name: u3, protocol: UDP, port: 5403}
  - {name: u4, protocol: UDP, port: 5404}
  - {name: u5, protocol: UDP, port: 5405}
  - {name: u6, protocol: UDP, port: 5406}
  - {name: "u;evil", protocol: UDP, port: 5409}
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: service-name, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: u1}]
  rules: [{backendRefs: [{name: "app;evil", port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: service-newline, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: u2}]
  rules: [{backendRefs: [{name: "app\n  elements = { 0 : 10.0.0.1 . 53 }", port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: namespace, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: u3}]
  rules: [{backendRefs: [{name: app, namespace: "victim;evil", port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: victim-service, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: u4}]
  rules: [{backendRefs: [{name: app, namespace: victim, port: 53}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: weights, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: u5}]
  rules: [{backendRefs: [{name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}, {name: app, namespace: victim, port: 53, weight: 1000000}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: UDPRoute
metadata: {name: section-name, namespace: evil}
spec:
  parentRefs: [{name: gw, sectionName: "u6;evil"}]
  rules: [{backendRefs: [{name: app, port: 53}]}]
`

// TestBadUDPRoutes: hostile UDPRoutes and UDP listeners (a Service name
// or namespace with ";evil" or a newline and an nftables element, the
// victim's Service from another namespace without a ReferenceGrant, 17
// backendRefs of the largest weight, one more than the CRD allows, a
// sectionName and a listener name with ";evil") are
// refused with their reason and reach neither a file nor the ruleset;
// their listeners refuse datagrams, and the victim's UDPRoute answers
// every datagram before, during and after.
func TestBadUDPRoutes(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the UDPRoute bad-input test needs root (nftables, network namespaces)")
		}
		t.Skip("the UDPRoute bad-input test needs root (nftables, network namespaces); set CI=true to make this a failure")
	}
	for _, bin := range []string{"nft", "ip", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s", bin)
		}
	}
	ns := "pudb-" + strconv.Itoa(os.Getpid()%100000)
	ipRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	ipRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	echoUDPIn(t, ns, "127.0.0.2:5353")

	dir := harness.ShortTempDir(t)
	manifests := filepath.Join(dir, "m")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, filepath.Join(manifests, "victim.yaml"), udpVictim)
	logPath := filepath.Join(dir, "pier.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	pier := exec.Command("ip", "netns", "exec", ns, harness.PierBin(t), "run", "-f", manifests,
		"--state-dir", filepath.Join(dir, "state"), "--api-addr", "127.0.0.1:8082", "--log-format", "json")
	pier.Stdout, pier.Stderr = logFile, logFile
	if err := pier.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pier.Process.Signal(os.Interrupt)
		_ = pier.Wait()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("pier log:\n%s", b[max(0, len(b)-6000):])
		}
	})

	victimVIP := ""
	harness.WaitFor(t, 20*time.Second, "the victim's Gateway serves", func() bool {
		victimVIP = udpGatewayAddress(ns, "victim")
		return victimVIP != "" && udpAsk(ns, victimVIP, 5300) == nil
	})
	harness.WriteFile(t, filepath.Join(manifests, "attack.yaml"), udpAttack)
	var gw *gwv1.Gateway
	harness.WaitFor(t, 20*time.Second, "pier's verdict on evil/gw", func() bool {
		gw = udpGateway(ns, "evil")
		return gw != nil && len(gw.Status.Addresses) > 0 && len(gw.Status.Listeners) == 7
	})
	for _, want := range []struct{ msg, reason string }{
		{"udproute warning", "BackendNotFound"},
		{"udproute warning", "RefNotPermitted"},
		{"udproute refused", "UnsupportedValue"},
		{"gateway refused", "Invalid"},
	} {
		if !loggedIn(t, logPath, want.msg, want.reason) {
			t.Errorf("no %q log line with reason %s", want.msg, want.reason)
		}
	}
	for _, l := range gw.Status.Listeners {
		if l.Name == "u6" && l.AttachedRoutes != 0 {
			t.Errorf("a parentRef to sectionName \"u6;evil\" attached: %+v", l)
		}
	}
	evilVIP := gw.Status.Addresses[0].Value
	for port := 5401; port <= 5406; port++ {
		if err := udpAsk(ns, evilVIP, port); !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("the listener on %d answered (%v), want its datagrams refused", port, err)
		}
	}
	for i := 0; i < 20; i++ {
		if err := udpAsk(ns, victimVIP, 5300); err != nil {
			t.Fatalf("the victim, datagram %d beside the attack: %v", i, err)
		}
	}
	// The attack's namespace is "evil": what must reach nothing is
	// ";evil" and the element the newline tried to add.
	out := ipRun(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset")
	if strings.Contains(out, ";evil") || strings.Contains(out, "10.0.0.1") {
		t.Errorf("the ruleset holds the attack:\n%s", out)
	}
	_ = filepath.WalkDir(filepath.Join(dir, "state"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".log") {
			if b, err := os.ReadFile(path); err == nil && (bytes.Contains(b, []byte(";evil")) || bytes.Contains(b, []byte("10.0.0.1"))) {
				t.Errorf("%s holds the attack", path)
			}
		}
		return nil
	})
}

func ipRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// echoUDPIn answers every datagram to addr in ns with the same bytes.
func echoUDPIn(t *testing.T, ns, addr string) {
	t.Helper()
	var pc net.PacketConn
	if err := netnsdo.Do(ns, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", addr)
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
			_, _ = pc.WriteTo(buf[:n], from)
		}
	}()
}

// udpAsk sends a datagram from a new socket in ns and waits for its echo.
func udpAsk(ns, addr string, port int) error {
	var c net.Conn
	if err := netnsdo.Do(ns, func() error {
		var err error
		c, err = net.Dial("udp4", net.JoinHostPort(addr, strconv.Itoa(port)))
		return err
	}); err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	if err == nil && string(buf[:n]) != "ping" {
		return errors.New("reply " + strconv.Quote(string(buf[:n])))
	}
	return err
}

// udpGateway reads namespace's Gateway gw from pier's API in ns.
func udpGateway(ns, namespace string) *gwv1.Gateway {
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
	resp, err := client.Get("http://127.0.0.1:8082/gateways/" + namespace + "/gw")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var gw gwv1.Gateway
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&gw) != nil {
		return nil
	}
	return &gw
}

func udpGatewayAddress(ns, namespace string) string {
	gw := udpGateway(ns, namespace)
	if gw == nil || len(gw.Status.Addresses) == 0 {
		return ""
	}
	return gw.Status.Addresses[0].Value
}

// loggedIn reports whether the JSON log at path has msg with reason.
func loggedIn(t *testing.T, path, msg, reason string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l struct{ Msg, Reason string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == msg && l.Reason == reason {
			return true
		}
	}
	return false
}
