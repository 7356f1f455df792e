package haproxydriver

import (
	"context"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// healthyWithin is the bound the agent relies on: it asks every 50 ms.
const healthyWithin = 50 * time.Millisecond

// untilUnhealthy polls Healthy every millisecond after kill and returns
// how long it stayed true.
func untilUnhealthy(t *testing.T, d *Driver, uuid string, kill func()) time.Duration {
	t.Helper()
	kill()
	began := time.Now()
	for time.Since(began) < 2*time.Second {
		if !d.Healthy(uuid) {
			return time.Since(began)
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("still healthy 2s after HAProxy was killed")
	return 0
}

func killPIDs(t *testing.T, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
}

func workerPIDs(t *testing.T, d *Driver, uuid string) []int {
	t.Helper()
	ws, err := d.lbs[uuid].sh.proc.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, w := range ws {
		if !w.Old {
			pids = append(pids, w.PID)
		}
	}
	if len(pids) == 0 {
		t.Fatal("no current worker")
	}
	return pids
}

// TestHealthyFollowsHAProxy kills HAProxy in each way it can die and
// checks that Healthy turns false within healthyWithin, that the agent's
// NotifyHealth function is called by then with Healthy already false
// (the mover looks at once, not at its next tick), then true again once
// the supervisor restarted it, and that it then serves.
func TestHealthyFollowsHAProxy(t *testing.T) {
	needHAProxy(t)
	d := newDriver(t, harness.ShortTempDir(t))
	t.Cleanup(func() { d.Close(true) })
	notified := make(chan bool, 16)
	var lbUUID string
	d.NotifyHealth(func() {
		select {
		case notified <- d.Healthy(lbUUID):
		default:
		}
	})
	lb := lbWith(1, freePort(t), memberAt(echo(t, "127.0.0.1:0", "one")))
	lbUUID = lb.UUID
	if d.Healthy(lb.UUID) {
		t.Fatal("healthy before any apply")
	}
	if _, err := d.Apply(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	if !d.Healthy(lb.UUID) || get(lb) != "one" {
		t.Fatal("not healthy and serving after apply")
	}
	if d.Healthy("0f8a2d3e-1111-4222-8333-444455556699") {
		t.Fatal("healthy for a load balancer never applied")
	}
	kills := []struct {
		name string
		kill func(master int, workers []int)
	}{
		{"master", func(m int, _ []int) { killPIDs(t, m) }},
		{"worker", func(_ int, ws []int) { killPIDs(t, ws...) }},
		{"every process", func(m int, ws []int) { killPIDs(t, append([]int{m}, ws...)...) }},
	}
	for _, k := range kills {
		master, workers := d.lbs[lb.UUID].sh.proc.PID(), workerPIDs(t, d, lb.UUID)
		took := untilUnhealthy(t, d, lb.UUID, func() { k.kill(master, workers) })
		t.Logf("kill -9 of the %s: unhealthy after %s", k.name, took)
		if took > healthyWithin {
			t.Errorf("kill -9 of the %s: unhealthy only after %s", k.name, took)
		}
		select {
		case healthy := <-notified:
			if healthy {
				t.Errorf("kill -9 of the %s: notified while Healthy still said true", k.name)
			}
		case <-time.After(healthyWithin):
			t.Errorf("kill -9 of the %s: no health notification within %s", k.name, healthyWithin)
		}
		harness.WaitFor(t, 20*time.Second, "the supervisor's restart", func() bool { return d.Healthy(lb.UUID) })
		for len(notified) > 0 {
			<-notified // a worker's death may be followed by its master's
		}
		if got := get(lb); got != "one" {
			t.Fatalf("after the restart that followed the kill of the %s: healthy but serves %q", k.name, got)
		}
	}
	d.Remove(lb.UUID)
	if d.Healthy(lb.UUID) {
		t.Fatal("healthy after Remove")
	}
}

// TestHealthyAdopted checks an adopted master, which is not our child
// and is polled: its death must show within the same bound.
func TestHealthyAdopted(t *testing.T) {
	needHAProxy(t)
	dir := harness.ShortTempDir(t)
	first := newDriver(t, dir)
	lb := lbWith(2, freePort(t), memberAt(echo(t, "127.0.0.1:0", "two")))
	if _, err := first.Apply(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	first.Close(false)
	d := newDriver(t, dir)
	t.Cleanup(func() { d.Close(true) })
	if err := d.Recover(context.Background(), map[string]bool{lb.UUID: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Apply(context.Background(), lb); err != nil {
		t.Fatal(err)
	}
	if !d.lbs[lb.UUID].sh.proc.Adopted() || !d.Healthy(lb.UUID) {
		t.Fatal("not adopted and healthy")
	}
	master := d.lbs[lb.UUID].sh.proc.PID()
	took := untilUnhealthy(t, d, lb.UUID, func() { killPIDs(t, master) })
	t.Logf("kill -9 of an adopted master: unhealthy after %s", took)
	if took > healthyWithin {
		t.Errorf("kill -9 of an adopted master: unhealthy only after %s", took)
	}
	harness.WaitFor(t, 20*time.Second, "the supervisor's restart", func() bool { return d.Healthy(lb.UUID) })
	if got := get(lb); got != "two" {
		t.Fatalf("healthy after the restart but serves %q", got)
	}
}
