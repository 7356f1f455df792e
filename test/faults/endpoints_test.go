package faults

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// awaitRuntimeUpdate writes a manifest and waits until pier applied it
// through the runtime API (the counter moved past before).
func (e *env) awaitRuntimeUpdate(file, content string) {
	e.t.Helper()
	before := runtimeUpdates(e.pier)
	write(e.t, e.manifests, file, content)
	harness.WaitFor(e.t, 5*time.Second, "a runtime API update after writing "+file, func() bool {
		return runtimeUpdates(e.pier) > before
	})
}

// podsSeen sends requests, each on a new connection, until want pods have
// answered or d has passed, and returns which pods answered and how long it
// took. The load clients share the round robin, so a few rounds may be
// needed.
func podsSeen(tg target, want int, d time.Duration) (map[string]int, time.Duration) {
	client := newClient(tg, true)
	seen := map[string]int{}
	began := time.Now()
	for len(seen) < want && time.Since(began) < d {
		if code, reply, err := send(client, tg); err == nil && code == 200 {
			seen[reply.Pod]++
		}
	}
	return seen, time.Since(began)
}

// TestEndpointChurn: 3→10→3 endpoints, 20 times, under load: no errors,
// no reload, every endpoint gets traffic at the 10 step.
func TestEndpointChurn(t *testing.T) {
	const cycles = 20
	e := newEnv(t)
	backends := startEchos(t, "churn", 10)
	write(t, e.manifests, "churn-svc.yaml", backendYAML("churn", pods(backends[:3])))
	write(t, e.manifests, "churn.yaml", simple("churn", "", "churn.example", "churn").yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/churn")
	hashBefore, reloadsBefore, updatesBefore := e.configHash(lb.UUID), reloads(p), runtimeUpdates(p)
	tg := target{name: "churn", addr: lb.VIP, port: p.HTTPPort, host: "churn.example", path: "/"}

	l := startLoad(tg)
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	var slowest time.Duration
	for i := range cycles {
		e.awaitRuntimeUpdate("churn-svc.yaml", backendYAML("churn", pods(backends)))
		seen, took := podsSeen(tg, 10, 2*time.Second)
		if len(seen) != 10 {
			t.Errorf("cycle %d, 10 endpoints: only %d answered within %s: %v", i, len(seen), took.Round(time.Millisecond), seen)
		}
		slowest = max(slowest, took)
		e.awaitRuntimeUpdate("churn-svc.yaml", backendYAML("churn", pods(backends[:3])))
	}
	took := time.Since(began)
	time.Sleep(500 * time.Millisecond)
	all := l.stop()

	total := report(t, all)
	n, updates := reloads(p)-reloadsBefore, runtimeUpdates(p)-updatesBefore
	t.Logf("endpoint churn: %d scale steps in %s, %d requests, %v reloads, %v runtime API updates, all 10 answered within %s at each 10 step, config %s → %s",
		2*cycles, took.Round(time.Millisecond), total, n, updates, slowest.Round(time.Millisecond), hashBefore, e.configHash(lb.UUID))
	requireNoErrors(t, all)
	if n != 0 {
		t.Errorf("endpoint churn reloaded HAProxy %v times, want 0 (runtime API only)", n)
	}
	if updates < 2*cycles {
		t.Errorf("%v runtime API updates for %d endpoint changes", updates, 2*cycles)
	}
	for _, s := range all {
		if len(s.pods) != 10 {
			t.Errorf("%s/%s: %d of 10 endpoints got load traffic: %v", s.target, s.profile, len(s.pods), s.pods)
		}
	}
}

// TestBackendRemoval deletes serving backends under load the way
// Kubernetes does (endpoint removed first, pod stopped after a grace),
// then scales to 0 and back up.
func TestBackendRemoval(t *testing.T) {
	const grace = 500 * time.Millisecond
	e := newEnv(t)
	backends := startEchos(t, "removal", 3)
	write(t, e.manifests, "removal-svc.yaml", backendYAML("removal", pods(backends)))
	write(t, e.manifests, "removal.yaml", simple("removal", "", "removal.example", "removal").yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/removal")
	reloadsBefore := reloads(p)
	tg := target{name: "removal", addr: lb.VIP, port: p.HTTPPort, host: "removal.example", path: "/"}

	// 3 → 2 → 1 endpoints while load runs: no request may fail.
	l := startLoad(tg)
	time.Sleep(time.Second)
	for n := 2; n >= 1; n-- {
		e.awaitRuntimeUpdate("removal-svc.yaml", backendYAML("removal", pods(backends[:n])))
		time.Sleep(grace)
		backends[n].stop()
		time.Sleep(time.Second)
	}
	phase1 := l.stop()

	// 0 endpoints: HAProxy answers 503 itself, quickly, on every request.
	e.awaitRuntimeUpdate("removal-svc.yaml", backendYAML("removal", nil))
	time.Sleep(grace)
	backends[0].stop()
	tg503 := tg
	tg503.name, tg503.want = "removal-empty", http.StatusServiceUnavailable
	l = startLoad(tg503)
	time.Sleep(2 * time.Second)
	phase2 := l.stop()

	// Scale up to new pods: served again, through the runtime API.
	fresh := make([]*echoBackend, 3)
	for i := range fresh {
		fresh[i] = startEcho(t, "removal", fmt.Sprintf("removal-new-%d", i))
	}
	e.awaitRuntimeUpdate("removal-svc.yaml", backendYAML("removal", pods(fresh)))
	l = startLoad(tg)
	time.Sleep(2 * time.Second)
	phase3 := l.stop()

	total := report(t, phase1) + report(t, phase2) + report(t, phase3)
	n := reloads(p) - reloadsBefore
	t.Logf("backend removal: %d requests in three phases (3→2→1 endpoints, 0, 3 new), %v reloads", total, n)
	requireNoErrors(t, phase1)
	requireNoErrors(t, phase2)
	requireNoErrors(t, phase3)
	for _, s := range phase2 {
		if s.maxLatency > time.Second {
			t.Errorf("%s/%s: a 503 took %s: the empty backend should answer at once", s.target, s.profile, s.maxLatency)
		}
	}
	for _, s := range phase3 {
		if len(s.pods) != 3 {
			t.Errorf("%s/%s after scale-up: %d of 3 new pods served: %v", s.target, s.profile, len(s.pods), s.pods)
		}
	}
	if n != 0 {
		t.Errorf("backend removal and scale-up reloaded HAProxy %v times, want 0", n)
	}
}
