package haproxydriver

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// TestSwitchToShardsUnderLoad is the upgrade to shards as the default: an
// agent that ran one HAProxy process per load balancer exits, leaving them
// serving, and the next one packs the same load balancers into shards.
// Clients keep sending new connections to every load balancer throughout;
// none may fail, the shards must take over every address, and the old
// processes must end.
func TestSwitchToShardsUnderLoad(t *testing.T) {
	needHAProxy(t)
	dir := harness.ShortTempDir(t)
	lbs := append(lbsIn(t, 0, 2, 1, 2), lbsIn(t, 1, 2, 1, 2)...)
	placed := map[string]bool{}
	for _, lb := range lbs {
		placed[lb.UUID] = true
	}
	old := newSharded(t, dir, 0)
	if err := old.Recover(context.Background(), placed); err != nil {
		t.Fatal(err)
	}
	applyAll(t, old, lbs...)
	serveAll(t, lbs...)
	oldMasters := masters(old)
	old.Close(false) // the agent exits; its HAProxy processes keep serving

	var ok, failed atomic.Int64
	var firstFailure atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range lbs {
		lb := lbs[i]
		want := "lb" + lb.Name[len("ns/lb-"):]
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if got := get(lb); got == want {
					ok.Add(1)
				} else {
					failed.Add(1)
					firstFailure.CompareAndSwap(nil, lb.Name+" at "+time.Now().Format("15:04:05.000"))
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)

	switched := time.Now()
	d := newSharded(t, dir, 2)
	t.Cleanup(func() { d.Close(true) })
	if err := d.Recover(context.Background(), placed); err != nil {
		t.Fatal(err)
	}
	applyAll(t, d, lbs...)
	d.waitStopped(slices.Collect(maps.Keys(d.stopping))...)
	took := time.Since(switched)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	t.Logf("switch to 2 shards under load: %s; %d requests ok, %d failed", took.Round(time.Millisecond), ok.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d requests failed during the switch, the first for %v", failed.Load(), firstFailure.Load())
	}
	if ok.Load() == 0 {
		t.Fatal("no request answered: the load measured nothing")
	}
	if m := masters(d); len(m) != 2 {
		t.Errorf("masters after the switch %v, want 2 shards", m)
	}
	for _, pid := range oldMasters {
		if alive(pid) {
			t.Errorf("the previous per-load-balancer master %d still runs", pid)
		}
	}
	serveAll(t, lbs...)
}
