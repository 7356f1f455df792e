package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store/storetest"
)

// TestReportsSurviveAnswersAfterTheTimeout: both nodes of a load balancer
// report at once through an API server whose answers come after the
// client's timeout (the server does the work; the client gives up),
// then retry as the agent's writer does until a write succeeds. Each
// node's entry must be in the status in the end: a write that timed out
// at the client may or may not have landed, and neither case may cost
// the other node its report.
func TestReportsSurviveAnswersAfterTheTimeout(t *testing.T) {
	srv := cluster(t)
	direct := newStore(t, nil, nil)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	agents := map[string]*Store{}
	proxies := map[string]interface{ SetDelay(time.Duration) }{}
	for _, node := range []string{"node-a", "node-b"} {
		p := srv.NewProxy(t)
		s, err := New(p.Config(srv.Config()), Options{Logger: quiet, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		events, err := s.Watch(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for range events {
			}
		}()
		agents[node], proxies[node] = s, p
	}
	const lbs = 20
	uuids := make([]string, lbs)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		if err := direct.PutSpec(t.Context(), storetest.Sample(uuids[i])); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(500 * time.Millisecond) // the watches cache what is placed on their node
	const timeout = 200 * time.Millisecond
	proxies["node-a"].SetDelay(300 * time.Millisecond)
	proxies["node-b"].SetDelay(350 * time.Millisecond)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		proxies["node-a"].SetDelay(0)
		proxies["node-b"].SetDelay(0)
	}()
	var wg sync.WaitGroup
	var timedOut atomic.Int64
	errs := make(chan error, 2*lbs)
	for node, s := range agents {
		for _, uuid := range uuids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				report := model.NodeStatus{Node: node, State: model.StateActive, SpecHash: "s-" + node}
				deadline := time.Now().Add(20 * time.Second)
				for {
					ctx, cancel := context.WithTimeout(t.Context(), timeout)
					err := s.PutNodeStatus(ctx, uuid, report)
					cancel()
					if err == nil {
						return
					}
					timedOut.Add(1)
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("%s %s: no write succeeded: %w", node, uuid, err)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	if timedOut.Load() < lbs {
		t.Errorf("only %d writes failed: the slow answers did not make the clients give up", timedOut.Load())
	}
	t.Logf("%d writes failed before each succeeded", timedOut.Load())
	for err := range errs {
		t.Error(err)
	}
	for _, uuid := range uuids {
		lb, err := direct.Get(t.Context(), uuid)
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range []string{"node-a", "node-b"} {
			if r, ok := lb.Status.Report(node); !ok || r.SpecHash != "s-"+node {
				t.Errorf("%s: no report of %s in the status (%+v)", uuid, node, lb.Status.Nodes)
			}
		}
	}
}

// TestNilMeansWritten: the agent's store writes on top of its cached copy,
// which another writer made stale; the conflict comes back in time, the
// fresh read after it does not (every answer takes 300 ms, the write has
// 450). PutNodeStatus must then fail, so that the agent writes the report
// again: it returned nil once (client-go's retry helper swallows a
// timeout on its first try), and the report was never written.
func TestNilMeansWritten(t *testing.T) {
	srv := cluster(t)
	direct := newStore(t, nil, nil)
	p := srv.NewProxy(t)
	agent, err := New(p.Config(srv.Config()), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Node: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { agent.Close() })
	lb := storetest.Sample("00000000-0000-4000-8000-00000000beef")
	if err := direct.PutSpec(t.Context(), lb); err != nil {
		t.Fatal(err)
	}
	// The agent caches the object as it is now (a first write, of its own).
	first := model.NodeStatus{Node: "node-b", State: model.StatePending}
	if err := agent.PutNodeStatus(t.Context(), lb.UUID, first); err != nil {
		t.Fatal(err)
	}
	// The other node reports: the agent's copy is stale from here on.
	if err := direct.PutNodeStatus(t.Context(), lb.UUID, model.NodeStatus{Node: "node-a", State: model.StateActive}); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 450*time.Millisecond)
	report := model.NodeStatus{Node: "node-b", State: model.StateActive, SpecHash: "s1"}
	err = agent.PutNodeStatus(ctx, lb.UUID, report)
	cancel()
	p.SetDelay(0)
	got, gerr := direct.Get(t.Context(), lb.UUID)
	if gerr != nil {
		t.Fatal(gerr)
	}
	stored, _ := got.Status.Report("node-b")
	written := stored.State == model.StateActive && stored.SpecHash == "s1"
	t.Logf("PutNodeStatus: %v; stored for node-b: %s", err, stored.State)
	if err == nil && !written {
		t.Fatalf("PutNodeStatus returned nil, but the status holds %+v for node-b: the report was not written", stored)
	}
}
