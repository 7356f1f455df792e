package haproxydriver

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// newLanded returns a driver with one shard and a landing of backends
// spare backends on a free port, and the first load balancer applied
// (which starts the shard, and the landing beside it).
func newLanded(t *testing.T, backends int) (*Driver, int, *model.LoadBalancer) {
	t.Helper()
	return newLandedWith(t, backends, "")
}

// newLandedWith is newLanded running binary (empty: haproxy).
func newLandedWith(t *testing.T, backends int, binary string) (*Driver, int, *model.LoadBalancer) {
	t.Helper()
	d := newSharded(t, harness.ShortTempDir(t), 1)
	if binary != "" {
		d.cfg.Binary = binary
	}
	port := freePort(t)
	d.cfg.Landing = render.LandingOptions{Port: port, Backends: backends}
	d.landing = newLanding(d.cfg, d.layout, d.processExited)
	t.Cleanup(func() { d.Close(true) })
	first := landingLB(t, 1, port)
	applyAll(t, d, first)
	waitUntil(t, func() bool {
		d.landing.mu.Lock()
		defer d.landing.mu.Unlock()
		return d.landing.started
	})
	return d, port, first
}

// landingLB is shardLB on the landing's port.
func landingLB(t *testing.T, n, port int) *model.LoadBalancer {
	lb := shardLB(t, n)
	lb.Listeners[0].Port = port
	return lb
}

func isLanded(d *Driver, uuid string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	inst := d.lbs[uuid]
	return inst != nil && inst.landed
}

// closes reports whether lb's answer closes the connection: the
// landing's always does, a shard's does not.
func closes(t *testing.T, lb *model.LoadBalancer) bool {
	t.Helper()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + net.JoinHostPort(lb.VIP, strconv.Itoa(lb.Listeners[0].Port)) + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Close
}

// TestLandingServesWithoutReload: a new load balancer in a running shard
// serves through the landing at once, the shard's workers and reload
// count unchanged; after the deferred reload its shard serves it and
// the landing has let go of its address.
func TestLandingServesWithoutReload(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 4)
	sh := d.lbs[first.UUID].sh
	workers, reloads := workerPIDs(t, d, first.UUID), sh.proc.Stats().ReloadsOK

	lb := landingLB(t, 2, port)
	served := firstServed(lb)
	start := time.Now()
	applyAll(t, d, lb)
	applied := time.Since(start)
	if got := get(lb); got != "lb2" {
		t.Fatalf("landed load balancer serves %q", got)
	}
	t.Logf("apply started to first 200 through the landing: %s (Apply returned after %s: it waits for haproxy -c of the fragment, run beside the landing)",
		(<-served).Sub(start).Round(time.Microsecond), applied.Round(time.Microsecond))
	if !isLanded(d, lb.UUID) || !closes(t, lb) {
		t.Fatal("not served by the landing")
	}
	if got := workerPIDs(t, d, first.UUID); !slices.Equal(got, workers) || sh.proc.Stats().ReloadsOK != reloads {
		t.Fatalf("the shard reloaded: workers %v -> %v, reloads %d -> %d", workers, got, reloads, sh.proc.Stats().ReloadsOK)
	}
	serveAll(t, first)

	waitUntil(t, func() bool { return !isLanded(d, lb.UUID) })
	if got := sh.proc.Stats().ReloadsOK; got != reloads+1 {
		t.Fatalf("fold-in: %d reloads, want 1", got-reloads)
	}
	serveAll(t, first, lb)
	if closes(t, lb) {
		t.Fatal("after fold-in, the landing still answers")
	}
	if n := testutil.ToFloat64(d.cfg.Metrics.Landings.WithLabelValues("landed")); n != 1 {
		t.Errorf("landed metric %v", n)
	}
	if n := testutil.ToFloat64(d.cfg.Metrics.Landings.WithLabelValues("folded")); n != 1 {
		t.Errorf("folded metric %v", n)
	}
	// The spare backend comes back after the grace.
	waitUntil(t, func() bool {
		d.landing.mu.Lock()
		defer d.landing.mu.Unlock()
		return len(d.landing.free) == 4
	})
}

// TestLandingIneligibleReloads: a load balancer the landing cannot
// reproduce (balance leastconn) takes the reload, as before.
func TestLandingIneligibleReloads(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 4)
	sh := d.lbs[first.UUID].sh
	reloads := sh.proc.Stats().ReloadsOK
	lb := landingLB(t, 2, port)
	lb.Pools[0].Algorithm = model.AlgorithmLeastConnections
	applyAll(t, d, lb)
	if isLanded(d, lb.UUID) || sh.proc.Stats().ReloadsOK != reloads+1 {
		t.Fatalf("landed %v, reloads %d", isLanded(d, lb.UUID), sh.proc.Stats().ReloadsOK-reloads)
	}
	serveAll(t, first, lb)
}

// TestLandingRemovedBeforeFoldIn: a landed load balancer removed before
// its shard loads it stops serving at once, without a reload, and its
// spare backend is free again.
func TestLandingRemovedBeforeFoldIn(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 4)
	d.landing.quiet, d.landing.most, d.landing.grace = time.Hour, time.Hour, 10*time.Millisecond
	sh := d.lbs[first.UUID].sh
	reloads := sh.proc.Stats().ReloadsOK
	lb := landingLB(t, 2, port)
	applyAll(t, d, lb)
	if !isLanded(d, lb.UUID) || get(lb) != "lb2" {
		t.Fatal("not landed")
	}
	d.Remove(lb.UUID)
	if got := get(lb); got != "" {
		t.Fatalf("removed load balancer still serves %q", got)
	}
	if sh.proc.Stats().ReloadsOK != reloads {
		t.Fatal("removing a landed load balancer reloaded its shard")
	}
	if _, listed := sh.lbs[lb.UUID]; listed {
		t.Fatal("still in its shard's list")
	}
	waitUntil(t, func() bool {
		d.landing.mu.Lock()
		defer d.landing.mu.Unlock()
		return len(d.landing.free) == 4
	})
	serveAll(t, first)
	// Applied again, it lands again.
	applyAll(t, d, lb)
	if !isLanded(d, lb.UUID) || get(lb) != "lb2" {
		t.Fatal("not landed again")
	}
}

// TestLandingOutOfSpares: with one spare backend, the second new load
// balancer takes the reload, which loads the landed one too.
func TestLandingOutOfSpares(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 1)
	d.landing.quiet, d.landing.most = time.Hour, time.Hour
	sh := d.lbs[first.UUID].sh
	reloads := sh.proc.Stats().ReloadsOK
	a, b := landingLB(t, 2, port), landingLB(t, 3, port)
	applyAll(t, d, a)
	if !isLanded(d, a.UUID) {
		t.Fatal("first one did not land")
	}
	applyAll(t, d, b)
	if isLanded(d, b.UUID) {
		t.Fatal("landed without a spare backend")
	}
	if isLanded(d, a.UUID) {
		t.Fatal("the shard's reload did not fold the landed one in")
	}
	if got := sh.proc.Stats().ReloadsOK - reloads; got != 1 {
		t.Fatalf("%d reloads, want 1", got)
	}
	serveAll(t, first, a, b)
}

// TestLandingChangedBeforeFoldIn: a change to a landed load balancer
// loads it into its shard (one reload) and the shard serves the change.
func TestLandingChangedBeforeFoldIn(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 4)
	d.landing.quiet, d.landing.most = time.Hour, time.Hour
	sh := d.lbs[first.UUID].sh
	lb := landingLB(t, 2, port)
	applyAll(t, d, lb)
	reloads := sh.proc.Stats().ReloadsOK
	next := lb.Clone()
	next.Pools[0].Members = []model.Member{memberAt(echo(t, "127.0.0.1:0", "lb2-next"))}
	if _, err := d.Apply(context.Background(), next); err != nil {
		t.Fatal(err)
	}
	if isLanded(d, lb.UUID) || sh.proc.Stats().ReloadsOK != reloads+1 {
		t.Fatalf("landed %v after a change, %d reloads", isLanded(d, lb.UUID), sh.proc.Stats().ReloadsOK-reloads)
	}
	if got := get(lb); got != "lb2-next" {
		t.Fatalf("serves %q after the change", got)
	}
}

// firstServed polls lb until it answers 200 and sends the time it did.
func firstServed(lb *model.LoadBalancer) <-chan time.Time {
	out := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && get(lb) == "" {
			time.Sleep(time.Millisecond)
		}
		out <- time.Now()
	}()
	return out
}

// TestLandingBurst: new load balancers applied at once into one shard
// with two spare backends: some land, the rest reload the shard (which
// folds the landed ones in, even those of the same batch). Once all are
// folded, none counts as landed any more, so a member change of each is
// a runtime update, not a reload.
func TestLandingBurst(t *testing.T) {
	needHAProxy(t)
	d, port, first := newLanded(t, 2)
	sh := d.lbs[first.UUID].sh
	var lbs []*model.LoadBalancer
	for n := 2; n <= 7; n++ {
		lbs = append(lbs, landingLB(t, n, port))
	}
	errs := make(chan error, len(lbs))
	for _, lb := range lbs {
		go func() {
			_, err := d.Apply(context.Background(), lb)
			errs <- err
		}()
	}
	for range lbs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	serveAll(t, append(lbs, first)...)
	if n := testutil.ToFloat64(d.cfg.Metrics.Landings.WithLabelValues("landed")); n == 0 {
		t.Fatal("nothing landed")
	}
	waitUntil(t, func() bool {
		for _, lb := range lbs {
			if isLanded(d, lb.UUID) {
				return false
			}
		}
		return true
	})
	reloads := sh.proc.Stats().ReloadsOK
	for _, lb := range lbs {
		next := lb.Clone()
		next.Pools[0].Members = append(next.Pools[0].Members, memberAt(echo(t, "127.0.0.1:0", lb.Name)))
		if _, err := d.Apply(context.Background(), next); err != nil {
			t.Fatal(err)
		}
	}
	if got := sh.proc.Stats().ReloadsOK - reloads; got != 0 {
		t.Fatalf("member changes after fold-in reloaded the shard %d times", got)
	}
}

// TestLandingDuringFoldIn: a shard's fold-in reload does not hold up the
// next landing in the shard. Every `haproxy -c` takes 2 s here (a large
// shard's check and reload take that long), so the fold-in reload runs
// for over 2 s; a new load balancer applied meanwhile serves well before
// it ends.
func TestLandingDuringFoldIn(t *testing.T) {
	needHAProxy(t)
	real, _ := exec.LookPath("haproxy")
	slow := filepath.Join(harness.ShortTempDir(t), "slow-haproxy")
	script := "#!/bin/sh\ncase \" $* \" in *\" -c \"*) sleep 2;; esac\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(slow, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	d, port, first := newLandedWith(t, 4, slow)
	d.landing.quiet = 10 * time.Millisecond
	sh := d.lbs[first.UUID].sh
	reloads := sh.proc.Stats().ReloadsOK
	a := landingLB(t, 2, port)
	applyAll(t, d, a) // returns after its fragment's 2 s check; the fold-in starts 10 ms later
	time.Sleep(200 * time.Millisecond)
	b := landingLB(t, 3, port)
	served := firstServed(b)
	start := time.Now()
	applyAll(t, d, b)
	took := (<-served).Sub(start)
	t.Logf("landed %s after the apply began, during a fold-in reload", took.Round(time.Millisecond))
	if took > time.Second {
		t.Fatalf("the landing waited %s for the fold-in reload", took)
	}
	waitUntil(t, func() bool { return !isLanded(d, a.UUID) && !isLanded(d, b.UUID) })
	if got := sh.proc.Stats().ReloadsOK - reloads; got < 1 || got > 2 {
		t.Fatalf("%d fold-in reloads, want 1 or 2", got)
	}
	serveAll(t, first, a, b)
}
