package agent

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/bolt"
)

// healthDriver is a gatedDriver whose data plane health the test sets.
type healthDriver struct {
	gatedDriver
	sick atomic.Bool
}

func (h *healthDriver) Healthy(string) bool { return !h.sick.Load() }

var _ driver.HealthChecker = (*healthDriver)(nil)

// TestReadiness: the readiness probe holds a node back while a load
// balancer placed on it (standby too) is not applied or does not serve,
// and not for one placed elsewhere or one whose apply was refused; the
// liveness probe stays good all along.
func TestReadiness(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	lb := func(uuid, name string, p model.Placement) *model.LoadBalancer {
		return &model.LoadBalancer{UUID: uuid, Name: name, Provider: model.ProviderHAProxy, VIP: "10.0.0.1", Placement: p}
	}
	standby := lb("aaaa0000-0000-4000-8000-000000000001", "ns/standby-here", model.Placement{Active: "n2", Standby: "n1"})
	elsewhere := lb("cccc0000-0000-4000-8000-000000000003", "ns/elsewhere", model.Placement{Active: "n2", Standby: "n3"})
	for _, l := range []*model.LoadBalancer{standby, elsewhere} {
		if err := st.PutSpec(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	d := &healthDriver{gatedDriver: gatedDriver{fakeDriver: fakeDriver{provider: model.ProviderHAProxy},
		gate: make(chan struct{}), gated: standby.UUID, running: map[string]int{}}}
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{d}, Metrics: metrics.New(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	waitCalls(t, &d.fakeDriver, "held aaaa 10.0.0.1")
	time.Sleep(1200 * time.Millisecond) // a readiness check ran with the apply held
	wantProbe(t, "held apply", a.Ready, "not applied yet: ns/standby-here")
	close(d.gate)
	waitProbe(t, "applied", a.Ready, "")

	d.sick.Store(true)
	waitProbe(t, "data plane down", a.Ready, "do not serve: ns/standby-here")
	d.sick.Store(false)
	waitProbe(t, "data plane back", a.Ready, "")

	d.reject = true
	refused := lb("bbbb0000-0000-4000-8000-000000000002", "ns/refused", model.Placement{Active: "n1", Standby: "n2"})
	if err := st.PutSpec(ctx, refused); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, &d.fakeDriver, "apply bbbb")
	time.Sleep(1200 * time.Millisecond)
	wantProbe(t, "a refused spec", a.Ready, "")
	wantProbe(t, "liveness", a.Alive, "")
}

// wantProbe checks a probe's answer now: "" for ready, else a part of
// the reason.
func wantProbe(t *testing.T, what string, probe func() error, want string) {
	t.Helper()
	err := probe()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: probe says %v, want ready", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: probe says %v, want %q", what, err, want)
	}
}

// waitProbe waits up to 5 s (readiness is decided once a second) for a
// probe's answer.
func waitProbe(t *testing.T, what string, probe func() error, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := probe()
		ok := (want == "" && err == nil) || (want != "" && err != nil && strings.Contains(err.Error(), want))
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: probe says %v, want %q", what, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAliveSeesAStuckLoop: the liveness probe fails once the loop has not
// turned for stuckAfter.
func TestAliveSeesAStuckLoop(t *testing.T) {
	a := &Agent{probes: newProbes()}
	wantProbe(t, "before the loop runs", a.Alive, "")
	a.probes.turnedAt.Store(time.Now().UnixNano())
	wantProbe(t, "turning", a.Alive, "")
	a.probes.turnedAt.Store(time.Now().Add(-stuckAfter - time.Second).UnixNano())
	wantProbe(t, "stuck", a.Alive, "has not turned for")
	wantProbe(t, "not started", a.Ready, "starting")
}
