//go:build linux

package pair

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/forge"
	"pier.dev/pier/test/harness"
)

// TestForgedVRRPAdverts: a neighbour on the node segment that is no node
// (a host added to `pier run --nodes 2`'s lab) sends VRRP adverts of
// priority 255 for the pair's router id, with the load balancer's
// addresses, unicast to both nodes, ten a second, for 5 s, while the
// client probes the VIP. Without the advert filter the active node steps
// down for the stronger "master" and nobody holds the addresses until
// the adverts stop; with it, the holder never changes, no probe fails and
// both nodes keep their roles.
func TestForgedVRRPAdverts(t *testing.T) {
	bin := skip(t)
	ctx := t.Context()
	prefix := fmt.Sprintf("pp%d-", os.Getpid())
	lab.RemoveStale("pp")
	dir := harness.ShortTempDir(t)
	env, err := Start(ctx, Options{Bin: bin, Dir: dir, Prefix: prefix, Manifests: "../../examples/ha",
		HTTPPort: 80, APIAddr: fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), Host: "ha.example", Ingress: "demo/ha", Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		env.Stop()
		if t.Failed() {
			t.Logf("pier run log (tail):\n%s", env.Log())
		}
	})
	lb := env.loadBalancer(t)
	active, standby := lb.Placement.Active, lb.Placement.Standby
	if _, err := env.WaitHolder(ctx, active, 5*time.Second); err != nil {
		t.Fatalf("the active node %s does not hold the VIP: %v", active, err)
	}
	env.waitRoles(t, map[string]model.VRRPState{active: model.VRRPMaster, standby: model.VRRPBackup})

	// The instance's addresses, as keepalived advertises them: a forger
	// reads them from the Ingress status.
	var addrs []netip.Addr
	for _, s := range []string{lb.VIP, lb.FIP} {
		if a, err := netip.ParseAddr(s); err == nil && a.Is4() && !a.IsLoopback() {
			addrs = append(addrs, a)
		}
	}
	intruder, err := env.Lab.AddHost("x", 66)
	if err != nil {
		t.Fatal(err)
	}
	targets := []netip.Addr{env.Node(active).Addr, env.Node(standby).Addr}
	adv := forge.Advert{RouterID: lb.Placement.RouterID, Priority: 255, Interval: 100 * time.Millisecond, Addrs: addrs}

	probe := env.Probe(ctx, FailureTimeout)
	time.Sleep(300 * time.Millisecond)
	sender, err := forge.Start(intruder.NS, intruder.Addr, targets, adv, forge.Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var samples, moved atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	wctx, stopWatch := context.WithTimeout(ctx, 5*time.Second)
	defer stopWatch()
	wg.Go(func() {
		for wctx.Err() == nil {
			h := env.Holders()
			samples.Add(1)
			if !slices.Equal(h, []string{active}) {
				moved.Add(1)
				first.CompareAndSwap(nil, fmt.Sprintf("%s after %s", h, time.Since(start).Round(time.Millisecond)))
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Wait()
	sent, failedSends := sender.Stop()
	time.Sleep(500 * time.Millisecond)
	results := probe.Stop()
	failed := harness.Failed(results, start, time.Now())

	t.Logf("%d forged adverts (priority 255, router id %d, %v) to %v over 5 s; holders sampled %d times, other than [%s] %d times; probes: %s",
		sent, adv.RouterID, addrs, targets, samples.Load(), active, moved.Load(), harness.Summary(results))
	if sent == 0 || failedSends > 0 {
		t.Fatalf("%d adverts sent, %d sends failed: the attack did not run", sent, failedSends)
	}
	if n := moved.Load(); n > 0 {
		t.Errorf("the forged adverts moved the addresses: holders other than [%s] in %d of %d samples, first %v",
			active, n, samples.Load(), first.Load())
	}
	if len(failed) > 0 {
		t.Errorf("%d probes failed during the forged adverts, first: %+v", len(failed), failed[0])
	}
	env.waitRoles(t, map[string]model.VRRPState{active: model.VRRPMaster, standby: model.VRRPBackup})
	if h := env.Holders(); !slices.Equal(h, []string{active}) {
		t.Errorf("holders after the attack: %v, want [%s]", h, active)
	}
}
