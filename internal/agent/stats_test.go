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
	refreshed []string
}

func (r *reportingDriver) Stats(string) driver.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return driver.Stats{Reloads: 1, RuntimeUpdates: 4, MembersUp: r.up, Members: 3}
}

func (r *reportingDriver) RefreshMembers(context.Context, string) error {
	time.Sleep(r.delay)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refreshed = append(r.refreshed, "x")
	return nil
}

func (r *reportingDriver) set(up int, delay time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.up, r.delay, r.refreshed = up, delay, nil
}

func (r *reportingDriver) refreshes() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refreshed)
}

// TestStatsReported drives the agent's steps by hand (no loop): an apply
// reports the driver's counts; a refresh before statsEvery reads
// nothing; a due refresh that finds the same numbers writes nothing, one
// that finds others writes them; and a slow data plane holds one tick no
// longer than statsBudget and one read, leaving the rest to the next.
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
	r := reported()
	if r.Reloads != 1 || r.RuntimeUpdates != 4 || r.MembersUp != 2 || r.Members != 3 {
		t.Fatalf("report after apply: %+v", r)
	}
	if d.refreshes() != 3 {
		t.Fatalf("%d member reads after 3 applies, want 3", d.refreshes())
	}

	d.set(2, 0)
	a.refreshStats(ctx)
	if n := d.refreshes(); n != 0 {
		t.Fatalf("%d member reads within statsEvery, want 0", n)
	}
	due := func() {
		for _, lb := range lbs {
			a.statsAt[lb.UUID] = time.Now().Add(-statsEvery)
		}
	}
	due()
	a.refreshStats(ctx)
	if n, now := d.refreshes(), reported(); n != 3 || !now.UpdatedAt.Equal(r.UpdatedAt) {
		t.Fatalf("a refresh that changed nothing: %d reads (want 3), report rewritten %s → %s", n, r.UpdatedAt, now.UpdatedAt)
	}

	d.set(1, 0)
	due()
	a.refreshStats(ctx)
	if now := reported(); now.MembersUp != 1 {
		t.Fatalf("a member went down, report still says %+v", now)
	}

	d.set(1, 30*time.Millisecond)
	due()
	start := time.Now()
	a.refreshStats(ctx)
	// The bound on took only catches a tick that reads on without end:
	// a loaded machine (CI beside other work) adds 60 ms and more.
	if took, n := time.Since(start), d.refreshes(); n != 2 || took > statsBudget+200*time.Millisecond {
		t.Fatalf("slow reads: %d in one tick of %s, want 2 within the budget", n, took)
	}
	a.refreshStats(ctx)
	if n := d.refreshes(); n != 3 {
		t.Fatalf("the next tick left %d reads done, want the third one too", n)
	}
}

// applyNow applies lb as the loop does, but in the caller's goroutine.
func applyNow(ctx context.Context, a *Agent, lb *model.LoadBalancer) {
	a.held[lb.UUID] = lb.Provider
	a.finishApply(ctx, runApply(ctx, a.driverOf(lb), lb, a.cfg.Logger))
}
