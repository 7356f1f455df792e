//go:build linux

// Package runecmp checks `pier run --nodes 3 --ecmp` as the demo uses it:
// the lab's router namespace runs bird with multipath, every node's
// speaker (in the one pier run process) listens in its node namespace,
// and the client reaches a native Service of type LoadBalancer through
// the router, spread over the three nodes.
package runecmp

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/harness"
)

const manifest = `apiVersion: v1
kind: Service
metadata: {name: spread, namespace: demo}
spec:
  type: LoadBalancer
  loadBalancerClass: pier.dev/native
  ports: [{name: tcp, protocol: TCP, port: 80, targetPort: 9100}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: spread-a
  namespace: demo
  labels: {kubernetes.io/service-name: spread}
addressType: IPv4
ports: [{name: tcp, protocol: TCP, port: 9100}]
endpoints:
  - addresses: ["10.99.0.50"]
    conditions: {ready: true}
`

// TestRunECMP: the VIP's route at the router has the three nodes as next
// hops, and 300 new connections from the client are served, by all
// three nodes (the endpoint answers the address each came from).
func TestRunECMP(t *testing.T) {
	bin := harness.NeedLab(t, "runecmp", "bird", "nft", "haproxy")
	prefix := "re" + strconv.Itoa(os.Getpid()) + "-"
	lab.RemoveStale("re")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	api := l.Addr().String()
	l.Close()
	state, err := os.MkdirTemp("", "re")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(state)
	logFile, err := os.Create(filepath.Join(dir, "pier.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	run := exec.Command(bin, "run", "--nodes", "3", "--ecmp", "--lab-prefix", prefix, "--state-dir", state,
		"--api-addr", api, "-f", dir)
	run.Stdout, run.Stderr = logFile, logFile
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = run.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = run.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = run.Process.Kill()
			<-done
		}
		removeLeft(prefix) // whatever a killed pier run left
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			lines := strings.Split(string(b), "\n")
			t.Logf("pier run, last lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	}()
	router, client, pods := prefix+"r", prefix+"c", prefix+"pods"
	// The route to the VIP (the pool's first address) with three next hops.
	vip := "10.99.0.129"
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := exec.Command("ip", "-n", router, "route", "show", vip).CombinedOutput()
		if strings.Count(string(out), "nexthop via") == 3 {
			t.Logf("router: %s", strings.Join(strings.Fields(string(out)), " "))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the router's route to %s has not three next hops within 60 s: %q", vip, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var srv net.Listener
	if err := netnsdo.Do(pods, func() error {
		var err error
		srv, err = net.Listen("tcp", "10.99.0.50:9100")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	go func() {
		for {
			c, err := srv.Accept()
			if err != nil {
				return
			}
			remote, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			fmt.Fprintf(c, "%s\n", remote.Addr())
			c.Close()
		}
	}()
	count := map[string]int{}
	for range 300 {
		var c net.Conn
		err := netnsdo.Do(client, func() error {
			var err error
			c, err = net.DialTimeout("tcp", vip+":80", 2*time.Second)
			return err
		})
		if err != nil {
			count["failed"]++
			continue
		}
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			count["failed"]++
			continue
		}
		count[strings.TrimSpace(line)]++
	}
	t.Logf("300 new connections by the node that served them: %v", count)
	if count["failed"] > 0 {
		t.Errorf("%d of 300 connections failed", count["failed"])
	}
	for _, node := range []string{"10.99.0.11", "10.99.0.12", "10.99.0.13"} {
		if count[node] < 50 {
			t.Errorf("node %s served %d of 300 connections: not spread", node, count[node])
		}
	}
}

// removeLeft deletes the namespaces named prefix… that still exist, after
// killing what runs in them.
func removeLeft(prefix string) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			lab.KillIn(e.Name())
			_ = exec.Command("ip", "netns", "delete", e.Name()).Run()
		}
	}
}
