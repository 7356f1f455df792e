package agent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
)

// fakeDriver records what the core asks of it.
type fakeDriver struct {
	provider model.Provider
	mu       sync.Mutex
	calls    []string
	drifted  []string
	reject   bool
}

func (f *fakeDriver) log(s string) { f.mu.Lock(); f.calls = append(f.calls, s); f.mu.Unlock() }

func (f *fakeDriver) Provider() model.Provider { return f.provider }
func (f *fakeDriver) Recover(_ context.Context, placed map[string]bool) error {
	var ids []string
	for id, here := range placed {
		if here {
			ids = append(ids, id[:4])
		}
	}
	slices.Sort(ids)
	f.log(fmt.Sprint("recover ", ids))
	return nil
}
func (f *fakeDriver) Apply(_ context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	f.log("apply " + lb.UUID[:4])
	if f.reject {
		return driver.Applied{}, fmt.Errorf("no: %w", driver.ErrRejected)
	}
	return driver.Applied{ConfigHash: "h-" + lb.SpecHash()[:8]}, nil
}
func (f *fakeDriver) Drifted() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.drifted
	f.drifted = nil
	return d
}
func (f *fakeDriver) Remove(uuid string) { f.log("remove " + uuid[:4]) }
func (f *fakeDriver) Close(stop bool) []string {
	f.log(fmt.Sprint("close ", stop))
	return nil
}

func (f *fakeDriver) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// TestCoreDispatchesByProvider: the core hands each load balancer placed
// on its node to the driver of its provider, removes it when it moves
// away, re-applies what a driver reports drifted, and does not retry a
// rejected spec by itself. No data plane runs here.
func TestCoreDispatchesByProvider(t *testing.T) {
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ha, native := &fakeDriver{provider: model.ProviderHAProxy}, &fakeDriver{provider: model.ProviderNative, reject: true}
	lb := func(uuid string, p model.Provider, node string) *model.LoadBalancer {
		return &model.LoadBalancer{UUID: uuid, Name: "ns/" + uuid[:4], Provider: p, VIP: "10.0.0.1",
			Placement: model.Placement{Active: node}}
	}
	ctx := context.Background()
	a1, b1 := lb("aaaa0000-0000-4000-8000-000000000001", model.ProviderHAProxy, "n1"), lb("bbbb0000-0000-4000-8000-000000000002", model.ProviderNative, "n1")
	for _, l := range []*model.LoadBalancer{a1, b1, lb("cccc0000-0000-4000-8000-000000000003", model.ProviderHAProxy, "n2")} {
		if err := st.PutSpec(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{ha, native}, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	waitCalls(t, ha, "apply aaaa")
	waitCalls(t, native, "apply bbbb")
	waitStatus(t, func() bool {
		got, _ := st.Get(ctx, a1.UUID)
		r, ok := got.Status.Report("n1")
		return ok && r.ConfigHash == "h-"+a1.SpecHash()[:8] && r.State == model.StateActive
	})
	ha.mu.Lock()
	ha.drifted = []string{a1.UUID}
	ha.mu.Unlock()
	waitCalls(t, ha, "apply aaaa", "apply aaaa")
	moved := a1.Clone()
	moved.Placement.Active = "n2"
	if err := st.PutSpec(ctx, moved); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, ha, "remove aaaa")
	time.Sleep(1500 * time.Millisecond) // a rejected spec waits for a change
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"recover [aaaa]", "apply aaaa", "apply aaaa", "remove aaaa", "close false"}
	if got := ha.seen(); !slices.Equal(got, want) {
		t.Errorf("haproxy driver: %q, want %q", got, want)
	}
	want = []string{"recover [bbbb]", "apply bbbb", "close false"}
	if got := native.seen(); !slices.Equal(got, want) {
		t.Errorf("native driver: %q, want %q", got, want)
	}
	if got, _ := st.Get(ctx, b1.UUID); got.Status.State != model.StateError {
		t.Errorf("rejected spec reported %s", got.Status.State)
	}
	_ = os.RemoveAll(dir)
}

// waitCalls waits until the driver's calls include want, in order.
func waitCalls(t *testing.T, f *fakeDriver, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		got, i := f.seen(), 0
		for _, c := range got {
			if i < len(want) && c == want[i] {
				i++
			}
		}
		if i == len(want) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s driver calls %q, want %q in order", f.provider, f.seen(), want)
}

func waitStatus(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("the applied config hash was not reported")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gatedDriver holds the apply of one load balancer until its gate opens,
// and counts the applies of each load balancer running at once.
type gatedDriver struct {
	fakeDriver
	gate    chan struct{}
	gated   string // UUID whose applies wait for gate
	running map[string]int
	overlap bool // two applies of one load balancer ran at once
}

func (g *gatedDriver) Apply(ctx context.Context, lb *model.LoadBalancer) (driver.Applied, error) {
	g.mu.Lock()
	g.running[lb.UUID]++
	g.overlap = g.overlap || g.running[lb.UUID] > 1
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.running[lb.UUID]--
		g.mu.Unlock()
	}()
	if lb.UUID == g.gated {
		g.log("held " + lb.UUID[:4] + " " + lb.VIP)
		<-g.gate
	}
	return g.fakeDriver.Apply(ctx, lb)
}

// TestSlowApplyHoldsUpNoOther: while one load balancer's apply is held
// (a 10,000-path group takes seconds), another load balancer's change is
// applied and reported; the held one's newer spec waits for its own
// apply to return and is applied once, after it, never beside it.
func TestSlowApplyHoldsUpNoOther(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	slow, quick := "aaaa0000-0000-4000-8000-000000000001", "bbbb0000-0000-4000-8000-000000000002"
	g := &gatedDriver{fakeDriver: fakeDriver{provider: model.ProviderHAProxy}, gate: make(chan struct{}),
		gated: slow, running: map[string]int{}}
	lb := func(uuid, vip string) *model.LoadBalancer {
		return &model.LoadBalancer{UUID: uuid, Name: "ns/" + uuid[:4], Provider: model.ProviderHAProxy, VIP: vip,
			Placement: model.Placement{Active: "n1"}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{g}, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	if err := st.PutSpec(ctx, lb(slow, "10.0.0.1")); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, &g.fakeDriver, "held aaaa 10.0.0.1")
	// While it is held: a newer spec of the slow one, and the quick one.
	if err := st.PutSpec(ctx, lb(slow, "10.0.0.2")); err != nil {
		t.Fatal(err)
	}
	quickLB := lb(quick, "10.0.0.3")
	if err := st.PutSpec(ctx, quickLB); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, func() bool {
		got, _ := st.Get(ctx, quick)
		r, ok := got.Status.Report("n1")
		return ok && r.State == model.StateActive
	})
	if got := g.seen(); slices.Contains(got, "apply aaaa") {
		t.Fatalf("the held apply returned before its gate opened: %q", got)
	}
	close(g.gate)
	waitCalls(t, &g.fakeDriver, "held aaaa 10.0.0.1", "apply bbbb", "apply aaaa", "held aaaa 10.0.0.2", "apply aaaa")
	waitStatus(t, func() bool {
		got, _ := st.Get(ctx, slow)
		r, ok := got.Status.Report("n1")
		return ok && r.State == model.StateActive && r.ConfigHash == "h-"+lb(slow, "10.0.0.2").SpecHash()[:8]
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.overlap {
		t.Error("two applies of one load balancer ran at once")
	}
	applies := 0
	for _, c := range g.calls {
		if c == "apply aaaa" {
			applies++
		}
	}
	if applies != 2 {
		t.Errorf("the slow load balancer was applied %d times, want 2 (its first spec, then its newest): %q", applies, g.calls)
	}
}
