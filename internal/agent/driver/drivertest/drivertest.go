// Package drivertest is the contract every driver.Driver passes, as
// storetest is for stores: the agent's core relies on the interface
// alone, and a new driver (keepalived, nftables, BGP) proves itself by
// running Run against a real data plane.
package drivertest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// Wait bounds every wait for the data plane. Generous: CI machines are
// shared.
var Wait = 15 * time.Second

// Harness is what a driver's test provides.
type Harness struct {
	// New returns a driver keeping its state in stateDir. Two drivers on
	// one stateDir, one after the other, are an agent restart.
	New func(t *testing.T, stateDir string) driver.Driver
	// StateDir returns a fresh state folder, removed when t ends.
	StateDir func(t *testing.T) string
	// LB returns valid load balancer n of the driver's provider, placed
	// here; distinct n never conflict (addresses, ports).
	LB func(t *testing.T, n int) *model.LoadBalancer
	// Change returns lb with a change the data plane must show.
	Change func(t *testing.T, lb *model.LoadBalancer) *model.LoadBalancer
	// Break returns lb with a spec the driver must refuse.
	Break func(lb *model.LoadBalancer) *model.LoadBalancer
	// Serving reports whether lb's spec is what this node serves now.
	Serving func(t *testing.T, lb *model.LoadBalancer) bool
	// Stopped reports whether nothing serves lb's addresses any more.
	Stopped func(t *testing.T, lb *model.LoadBalancer) bool
}

// Run checks h's driver against the contract:
//
//   - Apply serves the spec and is idempotent: the same spec gives the
//     same ConfigHash and changes nothing; a changed spec serves and
//     gives another hash.
//   - A refused spec returns an error and the previous spec keeps
//     serving.
//   - Remove stops serving, returns at once, and a later Apply of the
//     same UUID works.
//   - Close(false) leaves everything serving; a new driver on the same
//     state folder adopts it with the same ConfigHash.
//   - Recover stops what a previous driver left for load balancers no
//     longer placed here, and keeps the others.
//   - Close(true) stops everything and names what it stopped.
//   - Applies and removals of different load balancers may run at once
//     (the agent's core does so), while the readers the agent calls from
//     its loop (Drifted, and Healthy and Stats where implemented) answer.
func Run(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"ApplyIsIdempotent", testApply},
		{"RefusedSpecKeepsServing", testRefused},
		{"RemoveThenApply", testRemove},
		{"RestartAdopts", testRestart},
		{"RecoverStopsOrphans", testRecover},
		{"CloseStops", testClose},
		{"ConcurrentApplies", testConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// start returns a driver on a fresh folder, closed (stopping) when t ends.
func start(t *testing.T, h Harness) (driver.Driver, string) {
	dir := h.StateDir(t)
	d := h.New(t, dir)
	if err := d.Recover(context.Background(), map[string]bool{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(true) })
	return d, dir
}

func apply(t *testing.T, d driver.Driver, lb *model.LoadBalancer) driver.Applied {
	t.Helper()
	got, err := d.Apply(context.Background(), lb)
	if err != nil {
		t.Fatalf("apply %s: %v", lb.Name, err)
	}
	if got.ConfigHash == "" {
		t.Fatalf("apply %s: empty ConfigHash", lb.Name)
	}
	return got
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", Wait, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testApply(t *testing.T, h Harness) {
	d, _ := start(t, h)
	if d.Provider() == "" {
		t.Fatal("empty provider")
	}
	lb := h.LB(t, 0)
	first := apply(t, d, lb)
	eventually(t, "the spec does not serve", func() bool { return h.Serving(t, lb) })
	if again := apply(t, d, lb.Clone()); again != first {
		t.Fatalf("same spec: %+v, then %+v", first, again)
	}
	next := h.Change(t, lb)
	changed := apply(t, d, next)
	if changed == first {
		t.Fatalf("a changed spec kept ConfigHash %s", first.ConfigHash)
	}
	eventually(t, "the changed spec does not serve", func() bool { return h.Serving(t, next) })
	if len(d.Drifted()) != 0 {
		t.Fatalf("drifted %v with nothing restarted", d.Drifted())
	}
}

func testRefused(t *testing.T, h Harness) {
	d, _ := start(t, h)
	lb := h.LB(t, 0)
	apply(t, d, lb)
	if _, err := d.Apply(context.Background(), h.Break(lb)); err == nil {
		t.Fatal("a broken spec was applied")
	}
	if !h.Serving(t, lb) {
		t.Fatal("the previous spec stopped serving after a refused one")
	}
	apply(t, d, h.Change(t, lb)) // and the driver still takes good specs
}

func testRemove(t *testing.T, h Harness) {
	d, _ := start(t, h)
	a, b := h.LB(t, 0), h.LB(t, 1)
	apply(t, d, a)
	apply(t, d, b)
	begin := time.Now()
	d.Remove(a.UUID)
	if took := time.Since(begin); took > time.Second {
		t.Errorf("Remove took %s: it must not wait for draining", took)
	}
	eventually(t, "a removed load balancer still serves", func() bool { return h.Stopped(t, a) })
	if !h.Serving(t, b) {
		t.Fatal("removing one load balancer disturbed another")
	}
	apply(t, d, a)
	eventually(t, "a load balancer applied again after Remove does not serve", func() bool { return h.Serving(t, a) })
}

func testRestart(t *testing.T, h Harness) {
	dir := h.StateDir(t)
	lb := h.LB(t, 0)
	first := h.New(t, dir)
	if err := first.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	before := apply(t, first, lb)
	if stopped := first.Close(false); len(stopped) != 0 {
		t.Fatalf("Close(false) stopped %v", stopped)
	}
	if !h.Serving(t, lb) {
		t.Fatal("Close(false) stopped serving")
	}
	second := h.New(t, dir)
	t.Cleanup(func() { second.Close(true) })
	if err := second.Recover(context.Background(), map[string]bool{lb.UUID: true}); err != nil {
		t.Fatal(err)
	}
	if after := apply(t, second, lb); after != before {
		t.Fatalf("after a restart the same spec gives %+v, before %+v", after, before)
	}
	if !h.Serving(t, lb) {
		t.Fatal("not serving after the restart")
	}
}

func testRecover(t *testing.T, h Harness) {
	dir := h.StateDir(t)
	keep, gone := h.LB(t, 0), h.LB(t, 1)
	first := h.New(t, dir)
	if err := first.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	apply(t, first, keep)
	apply(t, first, gone)
	first.Close(false)
	second := h.New(t, dir)
	t.Cleanup(func() { second.Close(true) })
	if err := second.Recover(context.Background(), map[string]bool{keep.UUID: true}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "what a previous driver left for a load balancer gone still serves", func() bool { return h.Stopped(t, gone) })
	if !h.Serving(t, keep) {
		t.Fatal("Recover disturbed a load balancer still placed here")
	}
	apply(t, second, keep)
}

func testClose(t *testing.T, h Harness) {
	dir := h.StateDir(t)
	d := h.New(t, dir)
	if err := d.Recover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	a, b := h.LB(t, 0), h.LB(t, 1)
	apply(t, d, a)
	apply(t, d, b)
	stopped := d.Close(true)
	slices.Sort(stopped)
	want := []string{a.UUID, b.UUID}
	slices.Sort(want)
	if !slices.Equal(stopped, want) {
		t.Fatalf("Close(true) stopped %v, want %v", stopped, want)
	}
	for _, lb := range []*model.LoadBalancer{a, b} {
		if !h.Stopped(t, lb) {
			t.Fatalf("%s still serves after Close(true)", lb.Name)
		}
	}
}

func testConcurrent(t *testing.T, h Harness) {
	d, _ := start(t, h)
	lbs := make([]*model.LoadBalancer, 4)
	for i := range lbs {
		lbs[i] = h.LB(t, i)
	}
	uuids := make([]string, len(lbs))
	for i, lb := range lbs {
		uuids[i] = lb.UUID
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() { // what the agent's loop asks while applies run
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			d.Drifted()
			for _, uuid := range uuids {
				if hc, ok := d.(driver.HealthChecker); ok {
					hc.Healthy(uuid)
				}
				if r, ok := d.(driver.Reporter); ok {
					r.Stats(uuid)
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	defer func() { close(stop); readers.Wait() }()
	all := func(f func(i int, lb *model.LoadBalancer) error) {
		t.Helper()
		errs := make([]error, len(lbs))
		var wg sync.WaitGroup
		for i, lb := range lbs {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = f(i, lb) }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	all(func(_ int, lb *model.LoadBalancer) error {
		_, err := d.Apply(context.Background(), lb)
		return err
	})
	for _, lb := range lbs {
		eventually(t, lb.Name+" does not serve after concurrent applies", func() bool { return h.Serving(t, lb) })
	}
	// At once: two change, one goes, one is applied again unchanged.
	all(func(i int, lb *model.LoadBalancer) error {
		switch i {
		case 0, 1:
			lbs[i] = h.Change(t, lb)
			_, err := d.Apply(context.Background(), lbs[i])
			return err
		case 2:
			d.Remove(lb.UUID)
			return nil
		}
		_, err := d.Apply(context.Background(), lb)
		return err
	})
	eventually(t, "a load balancer removed beside other applies still serves", func() bool { return h.Stopped(t, lbs[2]) })
	for _, i := range []int{0, 1, 3} {
		eventually(t, lbs[i].Name+" does not serve its spec", func() bool { return h.Serving(t, lbs[i]) })
	}
}
