package kube

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
)

// requests counts a client's requests by method.
type requests struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *requests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		r.mu.Lock()
		r.n[req.Method]++
		r.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

func (r *requests) reset() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := r.n
	r.n = map[string]int{}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestWatchRefreshesCache: when the other node's agent has reported, the
// next report of this node's agent goes on top of the version its watch
// delivered: one PUT, not a PUT that conflicts, a GET and a PUT again.
func TestWatchRefreshesCache(t *testing.T) {
	srv := cluster(t)
	counted := &requests{n: map[string]int{}}
	cfg := srv.Config()
	cfg.Wrap(counted.wrap)
	a := newStore(t, cfg, nil) // node-a's agent
	b, err := New(srv.Config(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx := t.Context()
	if err := a.PutSpec(ctx, storetest.Sample("lb")); err != nil {
		t.Fatal(err)
	}
	events, err := a.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	report := func(s *Store, node, hash string) {
		t.Helper()
		if err := s.PutNodeStatus(ctx, "lb", model.NodeStatus{Node: node, State: model.StateActive, SpecHash: hash}); err != nil {
			t.Fatal(err)
		}
	}
	report(a, "node-a", "h1")
	report(b, "node-b", "h1")
	// a's watch delivers b's report.
	deadline := time.After(10 * time.Second)
	for seen := false; !seen; {
		select {
		case ev := <-events:
			_, seen = ev.LoadBalancer.Status.Report("node-b")
			seen = seen && ev.Type == store.EventPut
		case <-deadline:
			t.Fatal("node-b's report did not arrive on node-a's watch")
		}
	}
	counted.reset()
	report(a, "node-a", "h2")
	if got := counted.reset(); got[http.MethodPut] != 1 || got[http.MethodGet] != 0 {
		t.Fatalf("node-a's report after node-b's took %v, want one PUT and no GET", got)
	}
	lb := mustGet(t, a, "lb")
	if ra, _ := lb.Status.Report("node-a"); ra.SpecHash != "h2" {
		t.Fatalf("node-a's report is %+v, want h2", ra)
	}
	if rb, ok := lb.Status.Report("node-b"); !ok || rb.SpecHash != "h1" {
		t.Fatalf("node-b's report is %+v (%v), want h1 kept", rb, ok)
	}
}

// TestCreateSpecSkipsTheRead: a new load balancer takes one POST and no
// GET (PutSpec's read of an object it has not seen answers 404 first),
// and one another process created meanwhile is still replaced as PutSpec
// would: the create conflicts, and the write goes on top of a read.
func TestCreateSpecSkipsTheRead(t *testing.T) {
	srv := cluster(t)
	counted := &requests{n: map[string]int{}}
	cfg := srv.Config()
	cfg.Wrap(counted.wrap)
	s := newStore(t, cfg, nil)
	other, err := New(srv.Config(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	ctx := t.Context()

	counted.reset()
	if err := s.CreateSpec(ctx, storetest.Sample("new")); err != nil {
		t.Fatal(err)
	}
	if got := counted.reset(); got[http.MethodPost] != 1 || got[http.MethodGet] != 0 || len(got) != 1 {
		t.Fatalf("creating a new load balancer took %v, want one POST", got)
	}

	if err := other.PutSpec(ctx, storetest.Sample("theirs")); err != nil {
		t.Fatal(err)
	}
	next := storetest.Sample("theirs")
	next.VIP = "127.10.0.9"
	if err := s.CreateSpec(ctx, next); err != nil {
		t.Fatalf("CreateSpec of a load balancer another store created: %v", err)
	}
	if got := mustGet(t, other, "theirs").VIP; got != next.VIP {
		t.Fatalf("VIP after CreateSpec over another store's object = %s, want %s", got, next.VIP)
	}
}

// TestAgentCachesWhatIsPlacedOnIt: a node's agent (Options.Node) writes
// its first report of a load balancer placed on it on top of the version
// its watch delivered, one PUT and no GET; a load balancer placed
// elsewhere is not cached, and a report of it reads first.
func TestAgentCachesWhatIsPlacedOnIt(t *testing.T) {
	srv := cluster(t)
	counted := &requests{n: map[string]int{}}
	cfg := srv.Config()
	cfg.Wrap(counted.wrap)
	controller := newStore(t, nil, nil)
	agent, err := New(cfg, Options{Node: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	ctx := t.Context()
	events, err := agent.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	here, elsewhere := storetest.Sample("here"), storetest.Sample("elsewhere")
	elsewhere.Placement.Active, elsewhere.Placement.Standby = "node-c", "node-d"
	for _, lb := range []*model.LoadBalancer{here, elsewhere} {
		if err := controller.PutSpec(ctx, lb); err != nil {
			t.Fatal(err)
		}
	}
	// The node's watch delivers only what is placed on it (labels.go).
	if ev := storetest.Next(t, events); ev.LoadBalancer.UUID != "here" {
		t.Fatalf("the agent's watch delivered %s, want only the load balancer placed on it", ev.LoadBalancer.UUID)
	}
	report := model.NodeStatus{Node: "node-b", State: model.StateActive, SpecHash: "h1"}
	counted.reset()
	if err := agent.PutNodeStatus(ctx, "here", report); err != nil {
		t.Fatal(err)
	}
	if got := counted.reset(); got[http.MethodPut] != 1 || got[http.MethodGet] != 0 {
		t.Fatalf("the first report of a load balancer placed on the node took %v, want one PUT and no GET", got)
	}
	other := report
	other.Node = "node-c"
	if err := agent.PutNodeStatus(ctx, "elsewhere", other); err != nil {
		t.Fatal(err)
	}
	if got := counted.reset(); got[http.MethodGet] != 1 {
		t.Fatalf("a report of a load balancer placed elsewhere took %v, want it read first (not cached)", got)
	}
	if r, ok := mustGet(t, controller, "here").Status.Report("node-b"); !ok || r.SpecHash != "h1" {
		t.Fatalf("node-b's report is %+v (%v)", r, ok)
	}
}
