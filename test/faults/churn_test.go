package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"
)

// churnChanges is the number of config changes in TestConfigChurn. The
// target is 300 at 1–2/s; 120 at 2/s (one minute) keeps the package within its time
// budget on a shared two-core machine and CI, and still puts every kind of
// change (create/delete Ingress, add/remove path, annotation toggle, add
// host) through the same load balancer 17 times.
const churnChanges = 120

// churnInterval spaces the changes: ~2/s, far above the file watcher's 100 ms
// debounce, so each is applied on its own.
const churnInterval = 500 * time.Millisecond

// churn is TestConfigChurn's change generator: the "changing" Ingress of the group
// "shared", and short-lived "extra" Ingresses in extraGroup ("" gives each
// its own load balancer).
type churn struct {
	t          *testing.T
	dir        string
	extraGroup string
	changing   ingress
	n          int
}

func newChurn(t *testing.T, dir, extraGroup string) *churn {
	c := &churn{t: t, dir: dir, extraGroup: extraGroup, changing: ingress{name: "changing", group: "shared", balance: "roundrobin",
		rules: []rule{{host: "changing.example", paths: map[string]string{"/always": "changing"}}}}}
	write(t, dir, "changing.yaml", c.changing.yaml())
	return c
}

// step makes change number n: one file written or removed.
func (c *churn) step() string {
	cycle, op := c.n/7, c.n%7
	c.n++
	extra := fmt.Sprintf("extra-%d", cycle)
	host := fmt.Sprintf("h-%d.example", cycle)
	path := fmt.Sprintf("/p-%d", cycle)
	switch op {
	case 0:
		write(c.t, c.dir, extra+".yaml", simple(extra, c.extraGroup, extra+".example", "other").yaml())
		return "create Ingress " + extra
	case 1:
		c.changing.rules[0].paths[path] = "other"
	case 2:
		c.changing.balance = map[string]string{"roundrobin": "leastconn", "leastconn": "roundrobin"}[c.changing.balance]
	case 3:
		c.changing.rules = append(c.changing.rules, rule{host: host, paths: map[string]string{"/": "other"}})
	case 4:
		delete(c.changing.rules[0].paths, path)
	case 5:
		if err := os.Remove(filepath.Join(c.dir, extra+".yaml")); err != nil {
			c.t.Fatal(err)
		}
		return "delete Ingress " + extra
	case 6:
		c.changing.rules = c.changing.rules[:1]
	}
	write(c.t, c.dir, "changing.yaml", c.changing.yaml())
	return fmt.Sprintf("edit changing (op %d)", op)
}

// TestConfigChurn: 120 changes at ~2/s to one load balancer while load
// hits an unchanged route and a changed-but-always-present route of it.
func TestConfigChurn(t *testing.T) {
	e := newEnv(t)
	for _, svc := range []string{"stable", "changing", "other"} {
		write(t, e.manifests, svc+"-svc.yaml", backendYAML(svc, pods(startEchos(t, svc, 1))))
	}
	write(t, e.manifests, "stable.yaml", simple("stable", "shared", "stable.example", "stable").yaml())
	c := newChurn(t, e.manifests, "shared")
	p := e.start(nil)
	lb := lbNamed(t, p, sharedGroupName)
	hashBefore, reloadsBefore, okBefore := e.configHash(lb.UUID), reloads(p), reloadsOK(p)

	l := startLoad(
		target{name: "unchanged", addr: lb.VIP, port: p.HTTPPort, host: "stable.example", path: "/"},
		target{name: "changed", addr: lb.VIP, port: p.HTTPPort, host: "changing.example", path: "/always"})
	time.Sleep(time.Second)
	tick := time.NewTicker(churnInterval)
	for range churnChanges {
		<-tick.C
		c.step()
	}
	tick.Stop()
	lb = lbNamed(t, p, sharedGroupName) // the last change applied
	time.Sleep(time.Second)
	all := l.stop()

	total := report(t, all)
	n, ok := reloads(p)-reloadsBefore, reloadsOK(p)-okBefore
	t.Logf("config churn: %d changes in %s, %d requests, %v reloads (%v ok), config %s → %s",
		churnChanges, time.Duration(churnChanges)*churnInterval, total, n, ok, hashBefore, e.configHash(lb.UUID))
	requireNoErrors(t, all)
	if n > churnChanges {
		t.Errorf("%v reloads for %d changes: want at most one per change", n, churnChanges)
	}
	if ok != n {
		t.Errorf("%v of %v reloads were not ok", n-ok, n)
	}
	if ok < churnChanges/4 {
		t.Errorf("only %v reloads for %d changes: the changes did not reach HAProxy", ok, churnChanges)
	}
}

// stormIngress is variant v of TestReloadStorm's Ingress: /a and /b swap Services
// between odd and even v, and each of four variants has a path of its own,
// so writes coalesced while a reload runs never add up to the config that
// already runs (which would leave the agent idle). The balance algorithm
// alternates too: route changes alone go through the runtime API (map
// entries), a pool's settings need the reload this storm is about.
func stormIngress(v int) ingress {
	a, b := "svc-a", "svc-b"
	balance := "roundrobin"
	if v%2 == 1 {
		a, b = b, a
		balance = "leastconn"
	}
	return ingress{name: "storm", balance: balance, rules: []rule{
		{host: "storm.example", paths: map[string]string{"/a": a, "/b": b, fmt.Sprintf("/v%d", v%4): a}},
		{host: "stable.example", paths: map[string]string{"/": "stable"}},
	}}
}

const (
	stormWrites = 60
	// stormInterval is the fastest pace: the target is 60 reloads in 15 s.
	// Each write also waits for the previous reload, so a busy machine
	// stretches the storm instead of coalescing it into fewer reloads.
	stormInterval = 250 * time.Millisecond
	hardStopAfter = 5 * time.Second // set by harness.StartPier
)

// TestReloadStorm: 60 routing changes, each a reload, as fast as 60 in
// 15 s, under load; old workers must stay bounded by hard-stop-after.
func TestReloadStorm(t *testing.T) {
	e := newEnv(t)
	for _, svc := range []string{"svc-a", "svc-b", "stable"} {
		write(t, e.manifests, svc+"-svc.yaml", backendYAML(svc, pods(startEchos(t, svc, 1))))
	}
	write(t, e.manifests, "storm.yaml", stormIngress(0).yaml())
	p := e.start(nil)
	lb := lbNamed(t, p, ns+"/storm")
	dir := e.lbDir(lb.UUID)
	hashBefore, okBefore, allBefore := e.configHash(lb.UUID), reloadsOK(p), reloads(p)

	l := startLoad(
		target{name: "storm", addr: lb.VIP, port: p.HTTPPort, host: "storm.example", path: "/a"},
		target{name: "unchanged", addr: lb.VIP, port: p.HTTPPort, host: "stable.example", path: "/"})
	samples := sampleWorkers(dir)
	time.Sleep(time.Second)
	began := time.Now()
	tick := time.NewTicker(stormInterval)
	for i := range stormWrites {
		<-tick.C
		write(t, e.manifests, "storm.yaml", stormIngress(i+1).yaml())
		want := okBefore + float64(i+1)
		if !poll(10*time.Second, func() bool { return reloadsOK(p) >= want }) {
			t.Fatalf("write %d: no reload within 10s", i+1)
		}
	}
	tick.Stop()
	lbNamed(t, p, ns+"/storm")
	took := time.Since(began)
	time.Sleep(time.Second)
	all := l.stop()
	maxOld := samples.stop()

	total := report(t, all)
	ok, n := reloadsOK(p)-okBefore, reloads(p)-allBefore
	t.Logf("reload storm: %d writes in %s, %v reloads (%v ok), %d requests, at most %d old workers at once (%d samples), config %s → %s",
		stormWrites, took.Round(time.Millisecond), n, ok, total, maxOld, samples.n, hashBefore, e.configHash(lb.UUID))
	t.Logf("reload storm: per reload, from pier's log: %s", reloadTimings(p.LogPath))
	requireNoErrors(t, all)
	if ok != stormWrites {
		t.Errorf("%v reloads from %d writes: want exactly one each", ok, stormWrites)
	}
	for _, s := range all {
		if s.target == "storm" && (s.pods["svc-a-0"] == 0 || s.pods["svc-b-0"] == 0) {
			t.Errorf("%s/%s: /a never switched between svc-a and svc-b: %v", s.target, s.profile, s.pods)
		}
	}
	// At most one worker per reload inside a hard-stop-after window, plus
	// slack for a sample taken while a reload was forking.
	if bound := int(hardStopAfter/stormInterval) + 2; maxOld > bound {
		t.Errorf("%d old workers at once, want ≤ %d (hard-stop-after %s)", maxOld, bound, hardStopAfter)
	}
	var old int
	poll(hardStopAfter+3*time.Second, func() bool {
		_, w := haproxyProcs(dir)
		old = len(w) - 1
		return old == 0
	})
	if old != 0 {
		t.Errorf("%d old workers still running %s after the storm (hard-stop-after %s)", old, hardStopAfter+3*time.Second, hardStopAfter)
	}
}

// workerSampler counts old workers (workers beyond the current one) every
// 50 ms and keeps the maximum.
type workerSampler struct {
	done   chan struct{}
	wg     sync.WaitGroup
	max, n int
}

func sampleWorkers(dir string) *workerSampler {
	s := &workerSampler{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case <-s.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_, w := haproxyProcs(dir)
			s.max, s.n = max(s.max, len(w)-1), s.n+1
		}
	}()
	return s
}

func (s *workerSampler) stop() int {
	close(s.done)
	s.wg.Wait()
	return s.max
}

// poll polls cond every 50 ms for at most d and reports whether
// it held; unlike harness.WaitFor it does not fail the test.
func poll(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cond()
}

var tookPattern = regexp.MustCompile(`check_took=([0-9.]+m?s) reload_took=([0-9.]+m?s)`)

// reloadTimings summarises the `haproxy -c` and reload-confirmation times
// pier logs for each reload: what bounds the reload rate.
func reloadTimings(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err.Error()
	}
	var n int
	var check, reload, maxCheck, maxReload time.Duration
	for _, m := range tookPattern.FindAllStringSubmatch(string(b), -1) {
		c, err1 := time.ParseDuration(m[1])
		r, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			continue
		}
		n, check, reload = n+1, check+c, reload+r
		maxCheck, maxReload = max(maxCheck, c), max(maxReload, r)
	}
	if n == 0 {
		return "no reload timings logged"
	}
	return fmt.Sprintf("%d reloads: haproxy -c avg %s (max %s), reload and confirmation avg %s (max %s)",
		n, (check / time.Duration(n)).Round(time.Millisecond), maxCheck,
		(reload / time.Duration(n)).Round(time.Millisecond), maxReload)
}
