package kubemode

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestAPIServerOutage: kube-apiserver stops for 5 s (plus the time it
// takes to start again) under traffic through the VIP. The data plane
// does not notice (0 failed requests), a replica leads afterwards (the
// leader keeps the Lease when the outage stays below its renew deadline),
// the reconnect causes no HAProxy reload and no Ingress status write, and
// the controller applies a change made after the recovery.
func TestAPIServerOutage(t *testing.T) {
	e := newEnv(t)
	agent := e.startAgent()
	// Tolerance above the outage: a 15 s renew deadline.
	lease := []string{"--lease-duration", "20s", "--renew-deadline", "15s", "--retry-period", "2s"}
	ctls := []*proc{e.startController("ctl-1", lease...)}
	e.waitHolder("ctl-1", 20*time.Second)
	ctls = append(ctls, e.startController("ctl-2", lease...))
	vip, fip := addr(e.internal, 1), addr(e.public, 1)
	e.create(e.ingress("one", "one.example", nil))
	e.waitStatus("one", vip+","+fip, time.Minute)
	before := map[string]lbObject{}
	before["one"], _ = e.lbOf("one")
	writes := e.recordWrites()
	poll := e.pollStatus("one")
	reloads := agent.metric("pier_haproxy_reloads_total")
	stopLoad := startLoad(vip, "one.example")

	time.Sleep(time.Second)
	stopped := time.Now()
	e.srv.StopAPIServer()
	time.Sleep(5 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := e.srv.StartAPIServer(ctx); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
	down := time.Since(stopped)
	t.Logf("kube-apiserver unavailable for %s (5 s stopped, then its start-up)", down.Round(time.Millisecond))
	time.Sleep(5 * time.Second) // reconnects, relists, Lease renewals

	for _, r := range stopLoad() {
		t.Logf("load through the VIP across the outage: %s", r)
		if r.Transport+r.Unexpected > 0 || r.Requests == 0 {
			t.Errorf("load %s: want requests and 0 errors", r.Name)
		}
	}
	e.checkLeaderAfterOutage(ctls, down)
	if now := agent.metric("pier_haproxy_reloads_total"); now != reloads {
		t.Errorf("HAProxy starts+reloads went from %v to %v across the API server outage", reloads, now)
	}
	e.create(e.ingress("two", "two.example", nil))
	e.waitStatus("two", addr(e.internal, 2)+","+addr(e.public, 2), time.Minute)
	poll.stop()
	e.checkUnchanged(before, writes, poll)
}

// checkLeaderAfterOutage: ctl-1 kept the Lease if the outage stayed well
// below the 15 s renew deadline; otherwise it may have stepped down (and
// exited), and ctl-2 must have taken over once the Lease expired.
func (e *env) checkLeaderAfterOutage(ctls []*proc, down time.Duration) {
	t := e.t
	t.Helper()
	var holder string
	eventually(t, 30*time.Second, "a running replica holds the Lease", func() error {
		h, _, err := e.leaseHolder()
		for _, c := range ctls {
			if err == nil && c.name == h && !c.exited() {
				holder = h
				return nil
			}
		}
		return fmt.Errorf("holder %q (%v)", h, err)
	})
	for _, c := range ctls {
		if c.exited() {
			t.Logf("%s exited during the outage: %s", c.name, lastLine(c, "pier:"))
		}
	}
	t.Logf("%s holds the Lease after the outage (kept: %v)", holder, holder == "ctl-1")
	if down < 12*time.Second && (holder != "ctl-1" || ctls[0].exited()) {
		t.Errorf("leadership not kept across a %s outage, below the 15 s renew deadline", down.Round(time.Millisecond))
	}
}
