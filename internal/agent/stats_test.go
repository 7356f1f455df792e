package agent

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
)

// reportingDriver is a fakeDriver that tells stats; RefreshMembers takes
// delay and sets MembersUp to up.
type reportingDriver struct {
	fakeDriver
	mu        sync.Mutex
	up        int
	delay     time.Duration
	refreshed []string // the load balancers read, call after call
	calls     int
}

func (r *reportingDriver) Stats(string) driver.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return driver.Stats{Reloads: 1, RuntimeUpdates: 4, MembersUp: r.up, Members: 3}
}

func (r *reportingDriver) RefreshMembers(_ context.Context, uuids []string) error {
	r.mu.Lock()
	delay := r.delay
	r.mu.Unlock()
	time.Sleep(delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshed = append(r.refreshed, uuids...)
	r.calls++
	return nil
}

func (r *reportingDriver) set(up int, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up, r.delay, r.refreshed, r.calls = up, delay, nil, 0
}

// refreshes is how many load balancers were read, in how many calls.
func (r *reportingDriver) refreshes() (lbs, calls int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refreshed), r.calls
}

// TestStatsReported drives the agent's steps by hand (no loop): an apply
// reports the driver's counts; a refresh before StatsEvery reads
// nothing; a due refresh reads every due load balancer in one call, and
// one that finds the same numbers writes nothing, one that finds others
// writes them; a slow data plane does not hold the step that starts the
// read (the loop's), and no second read starts while one runs.
func TestStatsReported(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	d := &reportingDriver{fakeDriver: fakeDriver{provider: model.ProviderHAProxy}, up: 2}
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{d}, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var lbs []*model.LoadBalancer
	for _, uuid := range []string{"aaaa0000-0000-4000-8000-000000000001", "bbbb0000-0000-4000-8000-000000000002", "cccc0000-0000-4000-8000-000000000003"} {
		lb := &model.LoadBalancer{UUID: uuid, Name: "ns/" + uuid[:4], Provider: model.ProviderHAProxy, VIP: "10.0.0.1",
			Placement: model.Placement{Active: "n1"}}
		if err := st.PutSpec(ctx, lb); err != nil {
			t.Fatal(err)
		}
		applyNow(ctx, a, lb)
		lbs = append(lbs, lb)
	}
	first := lbs[0].UUID
	reported := func() model.NodeStatus {
		t.Helper()
		a.writer.flush(time.Second) // the loop's writer is not running here
		got, err := st.Get(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		r, _ := got.Status.Report("n1")
		return r
	}
	// refresh is one tick of the loop and, if it started a read, the
	// loop's taking of its result.
	refresh := func() {
		t.Helper()
		a.refreshStats(ctx)
		if !a.statsReading {
			return
		}
		select {
		case r := <-a.statsReads:
			a.finishStatsRead(ctx, r)
		case <-time.After(10 * time.Second):
			t.Fatal("the member read never finished")
		}
	}
	r := reported()
	if r.Reloads != 1 || r.RuntimeUpdates != 4 || r.MembersUp != 2 || r.Members != 3 {
		t.Fatalf("report after apply: %+v", r)
	}
	if n, calls := d.refreshes(); n != 3 || calls != 3 {
		t.Fatalf("%d member reads in %d calls after 3 applies, want 3 in 3", n, calls)
	}

	d.set(2, 0)
	refresh()
	if n, _ := d.refreshes(); n != 0 || a.statsReading {
		t.Fatalf("%d member reads within StatsEvery (reading: %v), want 0", n, a.statsReading)
	}
	due := func() {
		for _, lb := range lbs {
			a.statsAt[lb.UUID] = time.Now().Add(-StatsEvery)
		}
	}
	due()
	refresh()
	if n, calls := d.refreshes(); n != 3 || calls != 1 {
		t.Fatalf("a due refresh read %d load balancers in %d calls, want 3 in 1", n, calls)
	}
	if now := reported(); !now.UpdatedAt.Equal(r.UpdatedAt) {
		t.Fatalf("a refresh that changed nothing rewrote the report: %s → %s", r.UpdatedAt, now.UpdatedAt)
	}
	refresh()
	if n, _ := d.refreshes(); n != 3 {
		t.Fatalf("a refresh right after a read read again: %d", n)
	}

	d.set(1, 0)
	due()
	refresh()
	if now := reported(); now.MembersUp != 1 {
		t.Fatalf("a member went down, report still says %+v", now)
	}

	d.set(2, 300*time.Millisecond)
	due()
	start := time.Now()
	a.refreshStats(ctx)
	a.refreshStats(ctx) // while the first read runs: starts none
	// The loop's step returns at once; the bound only catches one that
	// waits for the read (300 ms), on a loaded machine too.
	if took := time.Since(start); took > 150*time.Millisecond || !a.statsReading {
		t.Fatalf("starting a slow read took %s (reading: %v), want no wait", took, a.statsReading)
	}
	select {
	case r := <-a.statsReads:
		a.finishStatsRead(ctx, r)
	case <-time.After(10 * time.Second):
		t.Fatal("the slow member read never finished")
	}
	if n, calls := d.refreshes(); n != 3 || calls != 1 || a.statsReading {
		t.Fatalf("slow reads: %d load balancers in %d calls (reading: %v), want 3 in 1", n, calls, a.statsReading)
	}
	if now := reported(); now.MembersUp != 2 {
		t.Fatalf("a member came back, report still says %+v", now)
	}
}

// applyNow applies lb as the loop does, but in the caller's goroutine.
func applyNow(ctx context.Context, a *Agent, lb *model.LoadBalancer) {
	a.held[lb.UUID] = lb.Provider
	a.finishApply(ctx, runApply(ctx, a.driverOf(lb), lb, a.cfg.Logger))
}

func TestStatsEvery(t *testing.T) {
	for n, want := range map[int]time.Duration{0: 2 * time.Second, 150: 2 * time.Second, 500: 5 * time.Second,
		1000: 10 * time.Second, 3000: 10 * time.Second} {
		if got := statsEvery(n); got != want {
			t.Errorf("statsEvery(%d) = %v, want %v", n, got, want)
		}
	}
}

// TestRateWindow: the first look opens a window; a window shorter than
// RatesEvery keeps the last rates; a full one measures requests per
// second and the 5xx share to two figures; totals that went down open a
// window without rates.
func TestRateWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	every := 10 * time.Second
	var w rateWindow
	step := func(at time.Duration, req, errs uint64, rate, share float64) {
		t.Helper()
		w = w.advance(driver.Stats{Requests: req, Errors5xx: errs}, t0.Add(at), every)
		if w.perSecond != rate || w.errorShare != share {
			t.Fatalf("at %v: %v/s, share %v; want %v, %v", at, w.perSecond, w.errorShare, rate, share)
		}
	}
	step(0, 500, 3, 0, 0)
	step(5*time.Second, 900, 3, 0, 0)              // not a window yet
	step(12*time.Second, 12841, 123, 1000, 0.0097) // 12341 in 12 s, 120 of them 5xx
	step(20*time.Second, 12841, 123, 1000, 0.0097) // 8 s: the last window's
	step(24*time.Second, 12841, 123, 0, 0)         // 12 s with none
	step(40*time.Second, 7, 0, 0, 0)               // a new driver: no rate yet
	step(50*time.Second, 207, 200, 20, 1)
	for in, want := range map[float64]float64{1234: 1200, 0.0456: 0.046, 99.5: 100, 7: 7, 0: 0} {
		if got := twoFigures(in); got != want {
			t.Errorf("twoFigures(%v) = %v, want %v", in, got, want)
		}
	}
}

// TestRecentErrorsOncePerWindow: the recent errors change a report only
// when a rate window closes, whatever the driver counted meanwhile, so a
// stream of errors is one status write a window; a new driver keeps the
// last ones shown.
func TestRecentErrorsOncePerWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	every := 10 * time.Second
	errs := func(n uint64) []model.RequestError {
		return []model.RequestError{{Status: 502, Count: n, Path: "/x\x1b", First: t0, Last: t0.Add(time.Duration(n) * time.Second)}}
	}
	var w rateWindow
	w = w.advance(driver.Stats{Requests: 10, Errors5xx: 1, RecentErrors: errs(1)}, t0, every)
	if w.errors != nil {
		t.Fatalf("first look: %+v, want none until a window closes", w.errors)
	}
	w = w.advance(driver.Stats{Requests: 20, Errors5xx: 2, RecentErrors: errs(2)}, t0.Add(5*time.Second), every)
	if w.errors != nil {
		t.Fatalf("mid-window: %+v", w.errors)
	}
	w = w.advance(driver.Stats{Requests: 30, Errors5xx: 3, RecentErrors: errs(3)}, t0.Add(10*time.Second), every)
	if len(w.errors) != 1 || w.errors[0].Count != 3 || w.errors[0].Path != "/x%1B" {
		t.Fatalf("window closed: %+v, want the driver's, bounded", w.errors)
	}
	w = w.advance(driver.Stats{Requests: 40, Errors5xx: 9, RecentErrors: errs(9)}, t0.Add(15*time.Second), every)
	if w.errors[0].Count != 3 {
		t.Errorf("mid-window: count %d, want the window's 3", w.errors[0].Count)
	}
	w = w.advance(driver.Stats{Requests: 1}, t0.Add(16*time.Second), every)
	if len(w.errors) != 1 || w.errors[0].Count != 3 {
		t.Errorf("new driver: %+v, want the last shown kept", w.errors)
	}
	many := make([]model.RequestError, 3*model.MaxRecentErrors)
	w = w.advance(driver.Stats{Requests: 2, RecentErrors: many}, t0.Add(30*time.Second), every)
	if len(w.errors) != model.MaxRecentErrors {
		t.Errorf("%d errors from a driver listing %d, want %d", len(w.errors), len(many), model.MaxRecentErrors)
	}
}
