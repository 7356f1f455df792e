package haproxydriver

import (
	"context"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// gatedSecret serves one TLS pair, but only once its gate opens: the
// apply of a load balancer that uses it is held inside its lane, as a
// slow one (thousands of paths) would be.
type gatedSecret struct {
	oneSecret
	gate    chan struct{}
	entered chan struct{}
	once    sync.Once
}

func (s *gatedSecret) TLSPair(ns, name string) ([]byte, []byte, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.gate
	return s.oneSecret.TLSPair(ns, name)
}

// TestLanes: while one load balancer's apply is held (before it loads),
// another load balancer's apply goes through and serves, whether it runs
// in a process of its own or in the same shared process, and the agent's
// readers (Healthy, Stats, Drifted) answer at once.
func TestLanes(t *testing.T) {
	needHAProxy(t)
	for _, tc := range []struct {
		name      string
		processes int
	}{
		{"process per load balancer", 0},
		{"one shared process", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			secret := &gatedSecret{gate: make(chan struct{}), entered: make(chan struct{})}
			d := newSharded(t, harness.ShortTempDir(t), tc.processes)
			d.cfg.Secrets = secret
			t.Cleanup(func() { d.Close(true) })

			slow := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "slow")))
			slow.Listeners = append(slow.Listeners, model.Listener{Name: "https", Protocol: model.ProtocolTerminatedHTTPS,
				Port: freePort(t), DefaultPoolID: "p1", Certificates: []model.Certificate{secret.rotate(t)}})
			quick := lbWith(2, freePort(t), memberAt(echo(t, "127.0.0.1:0", "quick")))
			slowDone := make(chan error, 1)
			go func() {
				_, err := d.Apply(context.Background(), slow)
				slowDone <- err
			}()
			<-secret.entered

			quickDone := make(chan error, 1)
			go func() {
				_, err := d.Apply(context.Background(), quick)
				quickDone <- err
			}()
			readers := time.Now()
			d.Healthy(slow.UUID)
			d.Stats(quick.UUID)
			d.Drifted()
			if took := time.Since(readers); took > 100*time.Millisecond {
				t.Errorf("Healthy, Stats and Drifted took %s while an apply was held", took)
			}
			select {
			case err := <-quickDone:
				if err != nil {
					t.Fatal(err)
				}
				if got := get(quick); got != "quick" {
					t.Fatalf("the other load balancer serves %q while the slow one is held", got)
				}
			case <-time.After(10 * time.Second): // about 0.1 s here; generous for CI
				t.Fatal("an apply waited for another one that was held")
			}
			close(secret.gate)
			if err := <-slowDone; err != nil {
				t.Fatal(err)
			}
			for _, lb := range []*model.LoadBalancer{slow, quick} {
				if get(lb) == "" {
					t.Errorf("%s serves nothing after both applies", lb.Name)
				}
				if !d.Healthy(lb.UUID) {
					t.Errorf("%s not healthy after its apply", lb.Name)
				}
			}
		})
	}
}

// TestShardLoadsWaitingChangesTogether applies eight load balancers of
// one shard at once, as an agent starting with many does: the applies
// that wait while the shard reloads are loaded together by the next
// reload, so the shard reloads far fewer times than there are load
// balancers (one per load balancer before), and every one serves.
func TestShardLoadsWaitingChangesTogether(t *testing.T) {
	needHAProxy(t)
	d := newSharded(t, harness.ShortTempDir(t), 1)
	t.Cleanup(func() { d.Close(true) })
	lbs := make([]*model.LoadBalancer, 9)
	for i := range lbs {
		lbs[i] = shardLB(t, i+1)
	}
	applyAll(t, d, lbs[0]) // the shard runs: the others join it
	var wg sync.WaitGroup
	errs := make([]error, len(lbs))
	for i, lb := range lbs[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = d.Apply(context.Background(), lb)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	serveAll(t, lbs...)
	sh := d.instance(lbs[0].UUID).sh
	if reloads := sh.proc.Stats().ReloadsOK; reloads > 4 || reloads < 1 {
		t.Errorf("8 load balancers joined a running shard with %d reloads, want 1 to 4", reloads)
	} else {
		t.Logf("8 load balancers joined a running shard with %d reloads", reloads)
	}
}
