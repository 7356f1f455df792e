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

// TestLanes: while one load balancer's apply is held, another load
// balancer in another HAProxy process is applied and serves, and the
// agent's readers (Healthy, Stats, Drifted) answer at once; with both in
// one shared process, the second waits for the first (one lane per
// process: its file list and reloads are one sequence).
func TestLanes(t *testing.T) {
	needHAProxy(t)
	for _, tc := range []struct {
		name      string
		processes int
		waits     bool
	}{
		{"process per load balancer", 0, false},
		{"one shared process", 1, true},
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
			if tc.processes == 1 {
				// The first start is made first: the lane test is about applies
				// of load balancers joining a running process.
				if _, err := d.Apply(t.Context(), lbWith(3, freePort(t), memberAt(echo(t, "127.0.0.1:0", "three")))); err != nil {
					t.Fatal(err)
				}
			}
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
			// Long enough for an apply that does not wait (about 0.1 s
			// here) on a loaded CI machine; long enough to show one that
			// waits does.
			wait := 10 * time.Second
			if tc.waits {
				wait = time.Second
			}
			select {
			case err := <-quickDone:
				if tc.waits {
					t.Fatalf("an apply in the held one's process returned (%v) before it", err)
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := get(quick); got != "quick" {
					t.Fatalf("the other load balancer serves %q while the slow one is held", got)
				}
			case <-time.After(wait):
				if !tc.waits {
					t.Fatal("an apply in another process waited for the held one")
				}
			}
			close(secret.gate)
			if err := <-slowDone; err != nil {
				t.Fatal(err)
			}
			if tc.waits {
				if err := <-quickDone; err != nil {
					t.Fatal(err)
				}
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
