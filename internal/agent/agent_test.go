package agent

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/driver"
	"pier.dev/pier/internal/agent/haproxydriver"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/testport"
)

type noSecrets struct{}

func (noSecrets) TLSPair(string, string) ([]byte, []byte, error) { return nil, nil, os.ErrNotExist }
func (noSecrets) Data(string, string) (map[string][]byte, error) { return nil, os.ErrNotExist }

func freePort(t *testing.T) int {
	t.Helper()
	return testport.Get(t)
}

// startAgent runs an agent on a fresh bolt store in a short temp dir
// (HAProxy's socket paths must stay short).
func startAgent(t *testing.T) (store.Store, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "pagent")
	if err != nil {
		t.Fatal(err)
	}
	st, err := bolt.Open(filepath.Join(dir, "pier.db"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	logger, m := slog.New(slog.NewTextHandler(io.Discard, nil)), metrics.New()
	d, err := haproxydriver.New(haproxydriver.Config{StateDir: dir, Secrets: noSecrets{}, Render: render.Options{HardStopAfter: 2 * time.Second},
		Metrics: m, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Node: "n1", Store: st, Drivers: []driver.Driver{d}, StopOnExit: true, Metrics: m, Logger: logger})
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
		st.Close()
		os.RemoveAll(dir)
	})
	return st, dir
}

func testLB(port int, backend string) *model.LoadBalancer {
	host, p, _ := net.SplitHostPort(backend)
	bp := 0
	for _, c := range p {
		bp = bp*10 + int(c-'0')
	}
	return &model.LoadBalancer{
		UUID: "0f8a2d3e-1111-4222-8333-444455556666", Name: "ns/a", Provider: model.ProviderHAProxy,
		VIP: "127.0.0.1", Placement: model.Placement{Active: "n1"},
		Listeners: []model.Listener{{Name: "http", Protocol: model.ProtocolHTTP, Port: port, DefaultPoolID: "p1"}},
		Pools:     []model.Pool{{ID: "p1", Name: "ns_web_80", Members: []model.Member{{Address: host, Port: bp, Weight: 1}}}},
	}
}

func waitActive(t *testing.T, st store.Store, uuid, specHash string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		lb, err := st.Get(context.Background(), uuid)
		if err == nil && lb.Status.State == model.StateActive && lb.Status.SpecHash == specHash {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("load balancer not active with spec %s", specHash[:8])
}

// TestAppliesAndStaysQuiet: once a spec is applied and reported, the
// agent writes nothing more. (Its own status write comes back as a store
// event; answering it with another write was a busy loop.)
func TestAppliesAndStaysQuiet(t *testing.T) {
	backend := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.Serve(l)
	t.Cleanup(func() { backend.Close() })

	st, _ := startAgent(t)
	port := freePort(t)
	lb := testLB(port, l.Addr().String())
	if err := st.PutSpec(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, lb.UUID, lb.SpecHash())
	resp, err := http.Get("http://127.0.0.1:" + itoa(port) + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("request through HAProxy: %v %v", resp, err)
	}
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	events, err := st.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-events // the replay of the one object
	writes := 0
	for range events {
		writes++
	}
	if writes != 0 {
		t.Fatalf("the agent wrote the store %d times in 2s with nothing to do", writes)
	}
}

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// TestFailedApplyIsNotRetriedInALoop: a spec that cannot be applied is
// reported once and retried by the timer, not by its own report's echo.
func TestFailedApplyIsNotRetriedInALoop(t *testing.T) {
	st, _ := startAgent(t)
	lb := testLB(freePort(t), "127.0.0.1:9")
	lb.Pools[0].ID = "NOT A VALID ID" // the renderer refuses it
	lb.Listeners[0].DefaultPoolID = lb.Pools[0].ID

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	events, err := st.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSpec(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	writes, errorReports := 0, 0
	for ev := range events {
		writes++
		if ev.LoadBalancer.Status.State == model.StateError {
			errorReports++
		}
	}
	if errorReports != 1 || writes != 2 {
		t.Fatalf("want the spec write and one ERROR report in 2s, got %d writes, %d ERROR reports", writes, errorReports)
	}
	got, err := st.Get(context.Background(), lb.UUID)
	if err != nil || got.Status.Message == "" {
		t.Fatalf("ERROR status without a message: %+v, %v", got.Status, err)
	}
}

// TestRewritesALostReport: a report that the stored status no longer
// holds (overwritten, or a write that never reached the object) is
// written again on the next event, although the agent's own last report
// is unchanged: left to the dedupe, the node's entry stays missing for
// as long as nothing changes.
func TestRewritesALostReport(t *testing.T) {
	backend := http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go backend.Serve(l)
	t.Cleanup(func() { backend.Close() })

	st, _ := startAgent(t)
	lb := testLB(freePort(t), l.Addr().String())
	ctx := context.Background()
	if err := st.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, lb.UUID, lb.SpecHash())
	// Another writer puts a stale entry for this node over the agent's.
	if err := st.PutNodeStatus(ctx, lb.UUID, model.NodeStatus{Node: "n1", State: model.StatePending}); err != nil {
		t.Fatal(err)
	}
	waitActive(t, st, lb.UUID, lb.SpecHash())
}
