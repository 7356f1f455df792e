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
