//go:build linux

package ecmp

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A router with resilient hashing (Linux next-hop groups of type
// resilient; "resilient ECMP" on many switches) keeps each hash bucket on
// its next hop while flows use it and gives a new next hop only buckets
// that were idle: a node added under load takes new flows without moving
// an established one. bird programs plain multipath routes, so here the
// test installs the group of the nodes bird has routes from.

// waitBirdRoutes waits until bird has n routes to the VIP.
func (w *world) waitBirdRoutes(n int, limit time.Duration) {
	w.t.Helper()
	waitFor(w.t, limit, fmt.Sprintf("%d routes to %s at bird", n, vip), func() bool {
		return strings.Count(w.birdc("show", "route", "for", vip, "all"), "unicast [") == n
	})
}

// resilientGroup makes the router's route to the VIP a resilient group
// of nodes 0..n-1 (replacing the group keeps the buckets of the next hops
// in both).
func (w *world) resilientGroup(n int) {
	t := w.t
	var ids []string
	for i := range n {
		run(t, "ip", "-n", routerNS, "nexthop", "replace", "id", fmt.Sprint(i+1), "via", nodeAddr(i), "dev", fmt.Sprintf("r%d", i))
		ids = append(ids, fmt.Sprint(i+1))
	}
	run(t, "ip", "-n", routerNS, "nexthop", "replace", "id", "100", "group", strings.Join(ids, "/"),
		"type", "resilient", "buckets", "256", "idle_timer", "1", "unbalanced_timer", "0")
	run(t, "ip", "-n", routerNS, "route", "replace", vip, "nhid", "100")
}

// TestECMPResilientRouter adds a node under load behind a router with
// resilient hashing: no established flow moves, so none breaks, and the
// new node takes new connections.
func TestECMPResilientRouter(t *testing.T) {
	w := newWorldOf(t, 3, worldOptions{resilient: true})
	flows := w.establish(t, 150)
	// Each flow speaks every 200 ms, so its bucket is never idle for the
	// router's idle timer (1 s).
	var mu sync.Mutex
	broken := map[int]error{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, f := range flows {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if err := f.ping(2 * time.Second); err != nil {
					mu.Lock()
					broken[f.sport] = err
					mu.Unlock()
					return
				}
			}
		}()
	}
	w.startNode(3)
	w.waitBirdRoutes(4, 30*time.Second)
	w.resilientGroup(4)
	byNode := map[string]int{}
	failed := 0
	deadline := time.Now().Add(4 * time.Second)
	for time.Now().Before(deadline) {
		f, err := request(time.Second)
		if err != nil {
			failed++
			continue
		}
		byNode[f.via]++
	}
	close(stop)
	wg.Wait()
	t.Logf("node 3 added behind a resilient group: new connections in the next 4 s by node %v, %d failed; established flows: %d of %d broken",
		byNode, failed, len(broken), len(flows))
	for port, err := range broken {
		t.Errorf("established flow from port %d broke: %v", port, err)
		break
	}
	if failed > 0 {
		t.Errorf("%d new connections failed", failed)
	}
	if byNode[nodeAddr(3)] == 0 {
		t.Errorf("the added node took no new connection in 4 s: %v", byNode)
	}
}
