package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// startTCPEcho serves raw TCP on a free loopback port: every line it
// reads comes back prefixed with its name, so a reply says which backend
// a connection reached. Nothing in it is HTTP.
func startTCPEcho(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
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
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := io.WriteString(c, name+" "+line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// tcpSay sends line over a new connection to addr:port and returns the
// reply line, or the error (a refused or closed connection).
func tcpSay(addr string, port int, line string) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 3*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", err
	}
	reply, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSuffix(reply, "\n"), err
}

func tcpService(name string, port int) string {
	return `
---
apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: demo}
spec:
  ports: [{name: tcp, port: 7000, targetPort: ` + strconv.Itoa(port) + `}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `-a
  namespace: demo
  labels: {kubernetes.io/service-name: ` + name + `}
addressType: IPv4
ports: [{name: tcp, port: ` + strconv.Itoa(port) + `}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
`
}

// gatewayListeners reads the Gateway's listener statuses from pier's API.
func gatewayListeners(t *testing.T, p *harness.Pier, ns, name string) []gwv1.ListenerStatus {
	t.Helper()
	resp, err := http.Get("http://" + p.API + "/gateways/" + ns + "/" + name)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var gw gwv1.Gateway
	if err := json.NewDecoder(resp.Body).Decode(&gw); err != nil {
		return nil
	}
	return gw.Status.Listeners
}

// TestTCPRouteEcho: `pier run` (real HAProxy) serves a TCPRoute on a TCP
// listener of a Gateway: raw TCP reaches the echo behind it through the
// VIP and the FIP, spread over two Services by weight. A TCPRoute whose
// backendRef names the Service "echo;evil" is not served (its listener
// refuses connections, and the name reaches no HAProxy file), while the
// good TCPRoute and an HTTPRoute on the same Gateway keep serving. The
// good one is v1 (the standard channel since v1.6), the other v1alpha2.
func TestTCPRouteEcho(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	httpPort, tcpPort, evilPort := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	doc := `apiVersion: gateway.networking.k8s.io/v1
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
  - {name: http, protocol: HTTP, port: ` + strconv.Itoa(httpPort) + `}
  - {name: echo, protocol: TCP, port: ` + strconv.Itoa(tcpPort) + `}
  - {name: evil, protocol: TCP, port: ` + strconv.Itoa(evilPort) + `}
---
apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata: {name: echo, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: echo}]
  rules: [{backendRefs: [{name: echo-a, port: 7000, weight: 1}, {name: echo-b, port: 7000, weight: 1}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata: {name: evil, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: evil}]
  rules: [{backendRefs: [{name: "echo;evil", port: 7000}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: site, namespace: demo}
spec:
  parentRefs: [{name: web, sectionName: http}]
  hostnames: [shop.example]
  rules: [{backendRefs: [{name: site, port: 80}]}]
---
apiVersion: v1
kind: Service
metadata: {name: site, namespace: demo}
spec:
  ports: [{name: http, port: 80, targetPort: 9001}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: site-a
  namespace: demo
  labels: {kubernetes.io/service-name: site}
addressType: IPv4
ports: [{name: http, port: 9001}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
` + tcpService("echo-a", startTCPEcho(t, "a")) + tcpService("echo-b", startTCPEcho(t, "b"))
	doc = strings.ReplaceAll(doc, "9001", strconv.Itoa(harness.StartEcho(t, "site", "site-pod")))
	harness.WriteFile(t, filepath.Join(manifests, "tcp.yaml"), doc)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})

	lb := p.ServingGateway("demo", "web")
	for _, addr := range []string{lb.VIP, lb.FIP} {
		seen := map[string]int{}
		for i := 0; i < 8; i++ {
			reply, err := tcpSay(addr, tcpPort, "hello "+strconv.Itoa(i))
			name, rest, _ := strings.Cut(reply, " ")
			if err != nil || rest != "hello "+strconv.Itoa(i) {
				t.Fatalf("via %s:%d: reply %q (%v)", addr, tcpPort, reply, err)
			}
			seen[name]++
		}
		// Round robin over two members of equal weight.
		if seen["a"] != 4 || seen["b"] != 4 {
			t.Errorf("via %s:%d: connections per backend %v, want 4 and 4", addr, tcpPort, seen)
		}
	}
	reply, err := tcpSay(lb.VIP, evilPort, "hello")
	if err == nil || !(errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset")) {
		t.Errorf("the listener of the TCPRoute naming \"echo;evil\": reply %q (%v), want the connection closed", reply, err)
	}
	code, got, _, err := harness.Get(&http.Client{Timeout: 5 * time.Second}, lb.VIP, httpPort, "shop.example", "/")
	if err != nil || code != 200 || got.Service != "site" {
		t.Errorf("the HTTPRoute beside them: %d %+v %v", code, got, err)
	}
	// The TCP listeners are Programmed once HAProxy serves them, as the
	// HTTP one is.
	harness.WaitFor(t, 10*time.Second, "the TCP listener Programmed", func() bool {
		for _, l := range gatewayListeners(t, p, "demo", "web") {
			if l.Name == "echo" {
				c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerConditionProgrammed))
				return c != nil && c.Status == metav1.ConditionTrue
			}
		}
		return false
	})
	for _, l := range gatewayListeners(t, p, "demo", "web") {
		if l.Name != "http" && (l.AttachedRoutes != 1 || len(l.SupportedKinds) != 1 || l.SupportedKinds[0].Kind != model.KindTCPRoute) {
			t.Errorf("listener %s: attachedRoutes %d, supportedKinds %+v", l.Name, l.AttachedRoutes, l.SupportedKinds)
		}
	}
	// GET /routes (pier get routes) lists both kinds with what pier made
	// of them: the refused TCPRoute's problem, the others accepted.
	routes, err := api.ListRoutes(t.Context(), p.API)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, r := range routes {
		accepted := "-"
		if len(r.Parents) == 1 {
			if c := meta.FindStatusCondition(r.Parents[0].Conditions, string(gwv1.RouteConditionAccepted)); c != nil {
				accepted = string(c.Status)
			}
		}
		listed[r.Kind+" "+r.Metadata.Name] = accepted + " " + strconv.Itoa(len(r.Problems))
	}
	// The evil route is Accepted (its listener is its own) but its
	// backend does not resolve: one problem, and its share refused.
	want := map[string]string{"HTTPRoute site": "True 0", "TCPRoute echo": "True 0", "TCPRoute evil": "True 1"}
	if !maps.Equal(listed, want) {
		t.Errorf("GET /routes: %v, want %v", listed, want)
	}
	// The name is refused before it reaches a file.
	err = filepath.WalkDir(state, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".conf") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), "evil") {
			t.Errorf("%s holds \"evil\"", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTCPRouteExample serves examples/gateway/tcp.yaml (with
// gateway.yaml's GatewayClass): its echo answers through the VIP.
func TestTCPRouteExample(t *testing.T) {
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	port := harness.FreePort(t)
	s := strings.Replace(readExample(t, "tcp.yaml"), "port: 5432", "port: "+strconv.Itoa(port), 1)
	s = strings.ReplaceAll(s, "9101", strconv.Itoa(startTCPEcho(t, "echo")))
	gatewayExample(t, manifests, "tcp.yaml", s)
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	lb := p.ServingGateway("demo", "tcp")
	if reply, err := tcpSay(lb.VIP, port, "ping"); err != nil || reply != "echo ping" {
		t.Errorf("via %s:%d: %q (%v), want \"echo ping\"", lb.VIP, port, reply, err)
	}
}
