package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/echo"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/harness"
)

// nativeManifests: one native Service (TCP 80 to the echo backend's
// port) and one Service of another class, which pier must leave alone.
const nativeManifests = `apiVersion: v1
kind: Service
metadata: {name: echo-l4, namespace: demo, uid: 9a7d2c2e-0000-4000-8000-000000000001}
spec:
  type: LoadBalancer
  loadBalancerClass: pier.dev/native
  ports: [{name: http, port: 80, protocol: TCP, targetPort: PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: echo-l4-1, namespace: demo, labels: {kubernetes.io/service-name: echo-l4}}
addressType: IPv4
ports: [{name: http, port: PORT, protocol: TCP}]
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata: {name: theirs, namespace: demo}
spec:
  type: LoadBalancer
  loadBalancerClass: example.com/other
  ports: [{port: 80}]
`

// TestNativeServiceThroughPierRun runs `pier run` in a network namespace
// of its own (pnat-<pid>-e: loopback only, no route anywhere), with a
// native Service in the manifests: the VIP and the FIP answer through
// nftables, `pier get loadbalancers` lists it with provider native, and
// when pier exits the ruleset is what it was before.
func TestNativeServiceThroughPierRun(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the native e2e test needs root (nftables, network namespaces)")
		}
		t.Skip("the native e2e test needs root (nftables, network namespaces); set CI=true to make this a failure")
	}
	for _, bin := range []string{"nft", "ip", "haproxy"} {
		if _, err := exec.LookPath(bin); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("the native e2e test needs %s (hack/deps.sh)", bin)
			}
			t.Skipf("the native e2e test needs %s", bin)
		}
	}
	ns := "pnat-" + strconv.Itoa(os.Getpid()%100000) + "-e"
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	port := startEchoIn(t, ns)

	dir := harness.ShortTempDir(t)
	harness.WriteFile(t, filepath.Join(dir, "svc.yaml"), strings.ReplaceAll(nativeManifests, "PORT", strconv.Itoa(port)))
	before := run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset")
	pier := exec.Command("ip", "netns", "exec", ns, harness.PierBin(t), "run", "-f", dir,
		"--state-dir", filepath.Join(dir, "state"), "--api-addr", "127.0.0.1:8082")
	var logs bytes.Buffer
	pier.Stdout, pier.Stderr = &logs, &logs
	if err := pier.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = pier.Process.Signal(os.Interrupt)
			_ = pier.Wait()
		}
	}
	t.Cleanup(stop)

	var got struct {
		Items []struct{ Name, Provider, VIP, FIP string }
	}
	harness.WaitFor(t, 20*time.Second, "pier get loadbalancers lists the native Service", func() bool {
		out, err := exec.Command("ip", "netns", "exec", ns, harness.PierBin(t), "get", "loadbalancers", "-o", "json").Output()
		return err == nil && json.Unmarshal(out, &got) == nil && len(got.Items) == 1 && got.Items[0].VIP != ""
	})
	lbs := got.Items
	if lbs[0].Name != "demo/echo-l4" || lbs[0].Provider != "native" {
		t.Fatalf("load balancers: %+v (the Service of another class must not be served)", lbs)
	}
	for _, addr := range []string{lbs[0].VIP, lbs[0].FIP} {
		harness.WaitFor(t, 10*time.Second, "the echo answers through "+addr, func() bool {
			return getIn(ns, addr+":80") == "echo-l4"
		})
	}
	stop()
	if after := run(t, "ip", "netns", "exec", ns, "nft", "list", "ruleset"); after != before {
		t.Fatalf("ruleset after pier exited:\n%s\nbefore:\n%s\npier logs:\n%s", after, before, logs.String())
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startEchoIn serves the echo backend on 127.0.0.1 of namespace ns.
func startEchoIn(t *testing.T, ns string) int {
	var l net.Listener
	if err := netnsdo.Do(ns, func() error {
		var err error
		l, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = echo.Serve(ctx, l, echo.Config{Namespace: "demo", Service: "echo-l4", Pod: "echo-0"},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

// getIn sends one HTTP request from inside ns and returns the Service the
// echo reports, or "" on any failure.
func getIn(ns, addr string) string {
	var c net.Conn
	if netnsdo.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, time.Second)
		return err
	}) != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
		return ""
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var reply echo.Response
	if json.NewDecoder(resp.Body).Decode(&reply) != nil {
		return ""
	}
	return reply.Service
}

// withoutRootManifests: the native Service of nativeManifests and an
// Ingress to the same backend.
const withoutRootManifests = nativeManifests + `---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: pier}
spec: {controller: pier.dev/ingress-controller}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web, namespace: demo}
spec:
  ingressClassName: pier
  defaultBackend: {service: {name: web, port: {number: 8888}}}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec:
  ports: [{name: http, port: 8888, targetPort: PORT}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: demo, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: PORT, protocol: TCP}]
endpoints:
- addresses: [127.0.0.1]
  conditions: {ready: true}
`

// TestNativeWithoutRootIsAClearError runs `pier run` as nobody (setpriv)
// in a namespace of its own: the native Service is in ERROR with the
// reason, and the Ingress beside it serves.
func TestNativeWithoutRootIsAClearError(t *testing.T) {
	for _, bin := range []string{"nft", "ip", "haproxy", "setpriv"} {
		if _, err := exec.LookPath(bin); err != nil || os.Geteuid() != 0 {
			if os.Getenv("CI") != "" {
				t.Fatalf("the native e2e test needs root and %s", bin)
			}
			t.Skipf("the native e2e test needs root and %s", bin)
		}
	}
	ns := "pnat-" + strconv.Itoa(os.Getpid()%100000) + "-r"
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	port := startEchoIn(t, ns)
	dir := harness.ShortTempDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	harness.WriteFile(t, filepath.Join(dir, "m.yaml"), strings.ReplaceAll(withoutRootManifests, "PORT", strconv.Itoa(port)))
	pier := exec.Command("ip", "netns", "exec", ns, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		harness.PierBin(t), "run", "-f", filepath.Join(dir, "m.yaml"), "--state-dir", filepath.Join(dir, "state"),
		"--http-port", "8080", "--api-addr", "127.0.0.1:8082")
	var logs bytes.Buffer
	pier.Stdout, pier.Stderr = &logs, &logs
	if err := pier.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pier.Process.Signal(os.Interrupt); _ = pier.Wait() })
	var got struct {
		Items []struct {
			Name, Provider, VIP string
			Status              struct{ State, Message string }
		}
	}
	byName := map[string]int{}
	harness.WaitFor(t, 20*time.Second, "both load balancers reported", func() bool {
		out, err := exec.Command("ip", "netns", "exec", ns, harness.PierBin(t), "get", "loadbalancers", "-o", "json").Output()
		if err != nil || json.Unmarshal(out, &got) != nil || len(got.Items) != 2 {
			return false
		}
		for i, lb := range got.Items {
			byName[lb.Name] = i
			if lb.Status.State == "PENDING" || lb.Status.State == "" {
				return false
			}
		}
		return true
	})
	native, web := got.Items[byName["demo/echo-l4"]], got.Items[byName["demo/web"]]
	if native.Status.State != "ERROR" || !strings.Contains(native.Status.Message, "root or CAP_NET_ADMIN") {
		t.Fatalf("native load balancer: %+v\n%s", native, logs.String())
	}
	t.Logf("native: %s: %s; ingress: %s", native.Status.State, native.Status.Message, web.Status.State)
	if web.Status.State != "ACTIVE" {
		t.Fatalf("the Ingress's load balancer: %+v\n%s", web, logs.String())
	}
	harness.WaitFor(t, 10*time.Second, "the Ingress serves", func() bool { return getIn(ns, web.VIP+":8080") == "echo-l4" })
}
