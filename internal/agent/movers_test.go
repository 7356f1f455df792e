package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
)

// fakeMover records what the core asks of it. It holds every placed load
// balancer whose data plane is healthy (MASTER), the others FAULT; a drain
// lets everything go.
type fakeMover struct {
	mu       sync.Mutex
	node     mover.Node
	calls    []string
	placed   []string
	roles    map[string]model.VRRPState
	reported map[string]model.VRRPState
	draining bool
	broken   error
}

func (f *fakeMover) log(s string) { f.calls = append(f.calls, s) }

func (f *fakeMover) Start(_ context.Context, node mover.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node = node
	f.log("start")
	return nil
}

func (f *fakeMover) Sync(_ context.Context, placed []*model.LoadBalancer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.placed = f.placed[:0]
	for _, lb := range placed {
		f.placed = append(f.placed, lb.UUID)
	}
}

func (f *fakeMover) Tick(context.Context) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var changed []string
	for _, uuid := range f.placed {
		role := model.VRRPFault
		if !f.draining && f.node.Healthy(uuid) && f.node.Served(uuid) {
			role = model.VRRPMaster
		}
		if f.roles[uuid] != role {
			f.roles[uuid] = role
			changed = append(changed, uuid)
		}
	}
	return changed
}

func (f *fakeMover) Role(uuid string) mover.Role {
	f.mu.Lock()
	defer f.mu.Unlock()
	return mover.Role{VRRP: f.roles[uuid]}
}

func (f *fakeMover) Reported(uuid string, r model.NodeStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reported[uuid] = r.VRRP
}

func (f *fakeMover) Drain(ctx context.Context, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draining = on
	f.log(fmt.Sprint("drain ", on))
	f.node.Reconnect(ctx, on)
}

func (f *fakeMover) Holding() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.roles {
		if r == model.VRRPMaster {
			return true
		}
	}
	return false
}

func (f *fakeMover) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.broken
}

func (f *fakeMover) Close(_ context.Context, stop bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	holding := false
	for _, r := range f.roles {
		holding = holding || r == model.VRRPMaster
	}
	f.log(fmt.Sprint("close ", stop, " holding ", holding))
}

// seen returns the calls and the placements given, by UUID prefix.
func (f *fakeMover) seen() ([]string, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var placed []string
	for _, uuid := range f.placed {
		placed = append(placed, uuid[:4])
	}
	return slices.Clone(f.calls), placed
}

// drainingDriver is a healthDriver that records drain requests.
type drainingDriver struct {
	healthDriver
	drains []bool
}

func (d *drainingDriver) Drain(_ context.Context, on bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.drains = append(d.drains, on)
	return nil
}

// TestCoreDrivesTheMover: the core gives the mover the load balancers
// placed on its node, reports the roles its ticks name, tells it which
// reports were written, takes its readiness, relays a drain (and the
// drivers' reconnect requests), and hands over before Run returns.
func TestCoreDrivesTheMover(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	lb := func(uuid string, p model.Placement) *model.LoadBalancer {
		return &model.LoadBalancer{UUID: uuid, Name: "ns/" + uuid[:4], Provider: model.ProviderHAProxy, VIP: "10.0.0.1", Placement: p}
	}
	here := lb("aaaa0000-0000-4000-8000-00000000000a", model.Placement{Active: "n1", Standby: "n2"})
	standby := lb("bbbb0000-0000-4000-8000-00000000000b", model.Placement{Active: "n2", Standby: "n1"})
	elsewhere := lb("cccc0000-0000-4000-8000-00000000000c", model.Placement{Active: "n2", Standby: "n3"})
	for _, l := range []*model.LoadBalancer{standby, here, elsewhere} {
		if err := st.PutSpec(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	d := &drainingDriver{healthDriver: healthDriver{gatedDriver: gatedDriver{fakeDriver: fakeDriver{provider: model.ProviderHAProxy},
		running: map[string]int{}}}}
	m := &fakeMover{roles: map[string]model.VRRPState{}, reported: map[string]model.VRRPState{}}
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{d}, Mover: m, HandOverOnExit: true, StopOnExit: true,
		Metrics: metrics.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()

	role := func(uuid string) model.VRRPState {
		got, _ := st.Get(ctx, uuid)
		r, _ := got.Status.Report("n1")
		return r.VRRP
	}
	waitStatus(t, func() bool { return role(here.UUID) == model.VRRPMaster && role(standby.UUID) == model.VRRPMaster })
	if _, placed := m.seen(); !slices.Equal(placed, []string{"aaaa", "bbbb"}) {
		t.Errorf("mover given %v, want the two load balancers placed on n1, sorted", placed)
	}
	waitStatus(t, func() bool {
		return m.Role(here.UUID) == mover.Role{VRRP: model.VRRPMaster} && reportedAs(m, here.UUID) == model.VRRPMaster
	})

	d.sick.Store(true)
	waitStatus(t, func() bool { return role(here.UUID) == model.VRRPFault })
	d.sick.Store(false)
	waitStatus(t, func() bool { return role(here.UUID) == model.VRRPMaster })

	m.mu.Lock()
	m.broken = errors.New("keepalived is not running")
	m.mu.Unlock()
	waitProbe(t, "mover broken", a.Ready, "keepalived is not running")
	m.mu.Lock()
	m.broken = nil
	m.mu.Unlock()

	a.SetDraining(true)
	waitStatus(t, func() bool { return role(here.UUID) == model.VRRPFault })
	a.SetDraining(false)
	waitStatus(t, func() bool { return role(here.UUID) == model.VRRPMaster })

	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	calls, _ := m.seen()
	want := []string{"start", "drain true", "drain false", "drain true", "close true holding false"}
	if !slices.Equal(calls, want) {
		t.Errorf("mover calls %q, want %q", calls, want)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !slices.Equal(d.drains, []bool{true, false, true}) {
		t.Errorf("driver asked to make clients reconnect %v, want [true false true]", d.drains)
	}
}

func reportedAs(m *fakeMover, uuid string) model.VRRPState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reported[uuid]
}

// batchingDriver is a fakeDriver that loads waiting applies together.
type batchingDriver struct{ fakeDriver }

func (*batchingDriver) Batches() bool { return true }

// TestApplyConcurrencyDefault: many applies at once by default only when
// a driver loads the waiting ones together.
func TestApplyConcurrencyDefault(t *testing.T) {
	plain := &fakeDriver{provider: model.ProviderNative}
	for _, tc := range []struct {
		drivers []driver.Driver
		set     int
		want    int
	}{
		{[]driver.Driver{plain}, 0, DefaultApplyConcurrency},
		{[]driver.Driver{&batchingDriver{fakeDriver{provider: model.ProviderHAProxy}}, plain}, 0, PackedApplyConcurrency},
		{[]driver.Driver{&batchingDriver{fakeDriver{provider: model.ProviderHAProxy}}}, 7, 7},
	} {
		a := New(Config{Node: "n1", Drivers: tc.drivers, ApplyConcurrency: tc.set, Logger: slog.New(slog.DiscardHandler)})
		if a.concurrency != tc.want {
			t.Errorf("%d drivers, ApplyConcurrency %d: %d at once, want %d", len(tc.drivers), tc.set, a.concurrency, tc.want)
		}
	}
	if err := New(Config{Node: "n1", Logger: slog.New(slog.DiscardHandler)}).Run(context.Background()); err == nil {
		t.Error("an agent without drivers ran")
	}
}
