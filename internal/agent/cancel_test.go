package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/model"
)

// cancelSuperseded cancels an apply whose load balancer is deleted or
// moved away at once, one a newer spec waits for once it has run
// supersedeAfter, and never one whose previous apply a newer spec
// already cancelled (specs arriving faster than a slow load balancer
// applies must not cancel all of them), nor one nothing waits for.
func TestCancelSuperseded(t *testing.T) {
	lb := func(uuid, node string, port int) *model.LoadBalancer {
		return &model.LoadBalancer{UUID: uuid, Provider: model.ProviderHAProxy, Placement: model.Placement{Active: node},
			Listeners: []model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: port}}}
	}
	old := lb("u", "n1", 80)
	for _, tc := range []struct {
		name    string
		next    *model.LoadBalancer // pending; nil: a deletion
		queued  bool
		ranFor  time.Duration
		keep    bool
		cancels string
	}{
		{"nothing pending", nil, false, time.Minute, false, ""},
		{"deleted", nil, true, 0, false, "its load balancer was deleted or left this node"},
		{"moved away", lb("u", "n2", 80), true, 0, false, "its load balancer was deleted or left this node"},
		{"newer spec, young apply", lb("u", "n1", 81), true, time.Second, false, ""},
		{"newer spec, old apply", lb("u", "n1", 81), true, supersedeAfter, false, supersededWhy},
		{"newer spec, previous apply superseded", lb("u", "n1", 81), true, time.Minute, true, ""},
		{"same spec again", lb("u", "n1", 80), true, time.Minute, false, ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		a := &Agent{cfg: Config{Node: "n1", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
			drivers: map[model.Provider]driver.Driver{model.ProviderHAProxy: &fakeDriver{provider: model.ProviderHAProxy}},
			pending: map[string]*model.LoadBalancer{},
			running: map[string]*runningApply{"u": {cancel: cancel, started: time.Now().Add(-tc.ranFor), hash: old.SpecHash(), keep: tc.keep}}}
		if tc.queued {
			a.pending["u"] = tc.next
		}
		a.cancelSuperseded()
		if got := a.running["u"].why; got != tc.cancels || (ctx.Err() != nil) != (tc.cancels != "") {
			t.Errorf("%s: cancelled %q (ctx %v), want %q", tc.name, got, ctx.Err(), tc.cancels)
		}
		cancel()
	}
}
