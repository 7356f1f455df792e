package faults

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// masterReloads asks the master CLI of the HAProxy in dir (`show proc`)
// how many reloads the master has done: HAProxy's own count, independent
// of pier's metrics.
func masterReloads(dir string) (int, error) {
	c, err := net.DialTimeout("unix", filepath.Join(dir, "master.sock"), 2*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("show proc\n")); err != nil {
		return 0, err
	}
	_ = c.(*net.UnixConn).CloseWrite() // the 2.6 master CLI answers after EOF
	b, err := io.ReadAll(c)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == "master" {
			return strconv.Atoi(f[2])
		}
	}
	return 0, fmt.Errorf("no master line in %q", b)
}

func readPID(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "haproxy.pid"))
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// outage finds, across clients, the last failure and the first request
// sent after it that succeeded; it also returns failures seen before from.
func outage(all []*stats, from time.Time) (lastErr, recovered time.Time, early int) {
	for _, s := range all {
		for _, at := range s.errAt {
			if at.After(lastErr) {
				lastErr = at
			}
			if at.Before(from) {
				early++
			}
		}
	}
	for _, s := range all {
		for _, at := range s.okAt {
			if at.After(lastErr) && (recovered.IsZero() || at.Before(recovered)) {
				recovered = at
			}
		}
	}
	return lastErr, recovered, early
}

// TestWorkerKilled: kill -9 of the HAProxy worker takes the master with
// it (by default HAProxy's master exits when a worker dies); pier's supervisor must restart HAProxy within 5 s,
// and requests fail only inside that window.
func TestWorkerKilled(t *testing.T) {
	const maxOutage = 5 * time.Second
	e := newEnv(t)
	write(t, e.manifests, "crash-svc.yaml", backendYAML("crash", pods(startEchos(t, "crash", 1))))
	write(t, e.manifests, "crash.yaml", simple("crash", "", "crash.example", "crash").yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/crash")
	dir := e.lbDir(lb.UUID)
	master, workers := haproxyProcs(dir)
	if master == 0 || len(workers) != 1 {
		t.Fatalf("want one master and one worker before the fault, got master %d workers %v", master, workers)
	}
	restartsBefore, updatesBefore := p.Metric("pier_haproxy_restarts_total"), runtimeUpdates(p)

	l := startLoad(target{name: "crash", addr: lb.VIP, port: p.HTTPPort, host: "crash.example", path: "/"})
	time.Sleep(time.Second)
	killed := time.Now()
	if err := syscall.Kill(workers[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, 15*time.Second, "a new HAProxy master", func() bool {
		m, w := haproxyProcs(dir)
		return m != 0 && m != master && len(w) > 0
	})
	newMaster, _ := haproxyProcs(dir)
	counted := poll(5*time.Second, func() bool { return p.Metric("pier_haproxy_restarts_total") > restartsBefore })
	time.Sleep(3 * time.Second)
	all := l.stop()
	if !counted {
		t.Errorf("pier_haproxy_restarts_total did not grow within 5s of the restart (master %d → %d)", master, newMaster)
	}

	total := report(t, all)
	lastErr, recovered, early := outage(all, killed)
	window := recovered.Sub(killed)
	var failed int
	for _, s := range all {
		failed += s.errors()
	}
	t.Logf("worker killed: worker %d killed; master %d → %d; %d requests, %d failed, last failure %s after the kill, "+
		"outage (kill → first success after it) %s; restarts counted %v; runtime API updates counted meanwhile %v",
		workers[0], master, newMaster, total, failed, lastErr.Sub(killed).Round(time.Millisecond),
		window.Round(time.Millisecond), p.Metric("pier_haproxy_restarts_total")-restartsBefore, runtimeUpdates(p)-updatesBefore)
	if early != 0 {
		t.Errorf("%d requests failed before the kill", early)
	}
	if recovered.IsZero() || window > maxOutage {
		t.Errorf("outage %s, want < %s", window, maxOutage)
	}
	for _, s := range all {
		if len(s.okAt) == 0 || !s.okAt[len(s.okAt)-1].After(recovered) {
			t.Errorf("%s/%s: no success after the outage", s.target, s.profile)
		}
	}
}

// TestPierKilledUnderLoad: SIGKILL of pier run under load. HAProxy keeps serving;
// the next pier adopts it and does not reload an unchanged config.
func TestPierKilledUnderLoad(t *testing.T) {
	e := newEnv(t)
	write(t, e.manifests, "kill-svc.yaml", backendYAML("kill", pods(startEchos(t, "kill", 2))))
	names := []string{"kill-a", "kill-b"}
	for _, n := range names {
		write(t, e.manifests, n+".yaml", simple(n, "", n+".example", "kill").yaml())
	}
	first := e.start(nil)
	var targets []target
	masters, hashes := map[string]int{}, map[string]string{}
	uuids := map[string]string{}
	for _, n := range names {
		lb := lbNamed(t, first, ns+"/"+n)
		uuids[n], masters[n], hashes[n] = lb.UUID, readPID(e.lbDir(lb.UUID)), e.configHash(lb.UUID)
		targets = append(targets, target{name: n, addr: lb.VIP, port: first.HTTPPort, host: n + ".example", path: "/"})
	}

	l := startLoad(targets...)
	time.Sleep(time.Second)
	first.Kill()
	time.Sleep(2 * time.Second) // HAProxy alone, no pier
	second := e.start(first)
	for _, n := range names {
		lbNamed(t, second, ns+"/"+n)
	}
	time.Sleep(time.Second)
	all := l.stop()

	total := report(t, all)
	ok, failed := reloadsOK(second), second.Metric("pier_haproxy_reloads_total", `result="failed"`)
	started := second.Metric("pier_haproxy_reloads_total", `result="started"`)
	t.Logf("pier killed: %d requests across the kill and restart; new pier: %v reloads ok, %v failed, %v started/adopted",
		total, ok, failed, started)
	requireNoErrors(t, all)
	if ok != 0 || failed != 0 {
		t.Errorf("the restarted pier reloaded HAProxy (%v ok, %v failed) although no config changed", ok, failed)
	}
	for _, n := range names {
		dir := e.lbDir(uuids[n])
		m, w := haproxyProcs(dir)
		t.Logf("pier killed: %s master pid %d → %d, workers %v, config %s → %s", n, masters[n], m, w, hashes[n], e.configHash(uuids[n]))
		if m != masters[n] || readPID(dir) != masters[n] {
			t.Errorf("%s: master pid %d before, %d (pid file %d) after: not adopted", n, masters[n], m, readPID(dir))
		}
		if len(w) != 1 {
			t.Errorf("%s: %d workers after the restart, want 1", n, len(w))
		}
		if h := e.configHash(uuids[n]); h != hashes[n] {
			t.Errorf("%s: config %s → %s", n, hashes[n], h)
		}
	}
}
