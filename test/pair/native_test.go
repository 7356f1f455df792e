package pair

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// nativeService is a Service of type LoadBalancer served by the native
// provider (nftables DNAT in the node), backed by the pods host's echo.
const nativeService = `apiVersion: v1
kind: Service
metadata:
  name: l4
  namespace: demo
spec:
  type: LoadBalancer
  loadBalancerClass: pier.dev/native
  ports:
    - name: tcp
      port: 80
      targetPort: 9001
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: l4-a
  namespace: demo
  labels:
    kubernetes.io/service-name: l4
addressType: IPv4
ports:
  - name: tcp
    port: 9001
endpoints:
  - addresses: ["10.99.0.50"]
`

// TestNativePair: a native load balancer's addresses move with the pair
// exactly like an Ingress's: its VIP is held by one node, the
// other node has the same nftables rules; a planned handover fails no
// connection (the straddling ones are handed back and the old node's
// conntrack finishes them) and the holder's link going down moves the
// VIP within the pair's unplanned target.
func TestNativePair(t *testing.T) {
	bin := skip(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("pn%d-", os.Getpid())
	lab.RemoveStale("pn")
	dir := harness.ShortTempDir(t)
	manifests := filepath.Join(dir, "in")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"ha.yaml"} {
		b, err := os.ReadFile(filepath.Join("../../examples/ha", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(manifests, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(manifests, "l4.yaml"), []byte(nativeService), 0o644); err != nil {
		t.Fatal(err)
	}
	apiAddr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	env, err := Start(ctx, Options{Bin: bin, Dir: dir, Prefix: prefix, Manifests: manifests,
		HTTPPort: 80, APIAddr: apiAddr, Host: "ha.example", Ingress: "demo/ha", Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.Stop()
		if t.Failed() {
			t.Logf("pier run log (tail):\n%s", env.Log())
		}
	})
	// The nodes forward what they DNAT to the pods host.
	for _, n := range env.Lab.Nodes {
		if out, err := exec.Command("ip", "netns", "exec", n.NS, "sysctl", "-qw", "net.ipv4.ip_forward=1").CombinedOutput(); err != nil {
			t.Fatalf("ip_forward on %s: %v %s", n.Name, err, out)
		}
	}
	var lb *model.LoadBalancer
	if err := env.waitFor(ctx, "the native load balancer placed, with a VIP", 30*time.Second, func() bool {
		lbs, err := api.ListLoadBalancers(ctx, apiAddr)
		if err != nil {
			return false
		}
		for _, l := range lbs {
			if l.Provider == model.ProviderNative && l.VIP != "" && l.Placement.Standby != "" {
				lb = l
				return true
			}
		}
		return false
	}); err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr(lb.VIP)
	probe := func(timeout time.Duration) *harness.Probe {
		return harness.StartProbe(ctx, harness.ProbeOptions{URL: "http://" + netip.AddrPortFrom(vip, 80).String() + "/",
			Host: "l4.example", Netns: env.Lab.Client.NS, Timeout: timeout})
	}
	holderOf := func() string {
		h := env.Lab.Holders(vip)
		if len(h) != 1 {
			return ""
		}
		return h[0]
	}
	var lastErr error
	if err := env.waitFor(ctx, "the native VIP to serve from the client host", 30*time.Second, func() bool {
		lastErr = env.getOnce(netip.AddrPortFrom(vip, 80), "l4.example")
		return lastErr == nil && holderOf() != ""
	}); err != nil {
		t.Fatalf("%v (the last request: %v; holders of %s: %v)", err, lastErr, vip, env.Lab.Holders(vip))
	}
	holder := holderOf()
	other := lb.Placement.Active
	if other == holder {
		other = lb.Placement.Standby
	}
	t.Logf("native %s: VIP %s held by %s, placement %s/%s", lb.Name, vip, holder, lb.Placement.Active, lb.Placement.Standby)

	t.Run("planned handover", func(t *testing.T) {
		p := probe(FailureTimeout)
		time.Sleep(500 * time.Millisecond)
		start, err := env.Drain(holder, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.waitFor(ctx, other+" holding the native VIP", 5*time.Second, func() bool { return holderOf() == other }); err != nil {
			p.Stop()
			t.Fatal(err)
		}
		moved := time.Now()
		time.Sleep(time.Second)
		samples := p.Stop()
		t.Logf("native planned: %s drained, %s holds the VIP after %s; %s", holder, other,
			moved.Sub(start).Round(time.Millisecond), harness.Summary(samples))
		if failed := harness.Failed(samples, start.Add(-time.Second), time.Now()); len(failed) > 0 {
			t.Errorf("%d requests failed during the handover, first %+v", len(failed), failed[0])
		}
		if _, err := env.Drain(holder, false); err != nil {
			t.Fatal(err)
		}
		holder, other = other, holder
	})

	t.Run("the holder's link goes down", func(t *testing.T) {
		p := probe(RecoveryTimeout)
		time.Sleep(500 * time.Millisecond)
		if err := env.Node(holder).SetLink(false); err != nil {
			t.Fatal(err)
		}
		fault := time.Now()
		deadline := time.Now().Add(3 * time.Second)
		for !env.Node(other).Has(vip) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(500 * time.Millisecond)
		samples := p.Stop()
		if err := env.Node(holder).SetLink(true); err != nil {
			t.Fatal(err)
		}
		took, ok := harness.Recovery(samples, fault)
		if !ok {
			t.Fatalf("no request succeeded after the link went down: %s", harness.Summary(samples))
		}
		t.Logf("native link cut: %s cut off; first success through %s after %s; %s", holder, other, took.Round(time.Millisecond), harness.Summary(samples))
		if took > unplannedTarget {
			t.Errorf("failover after link down took %s, target %s", took, unplannedTarget)
		}
	})
}
