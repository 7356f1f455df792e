package faults

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestRestartDuringChurn's timeline: changes 0–9 with pier up, SIGKILL 150 ms after the last,
// changes 10–12 while it is down (the last deletes extra-1, whose load
// balancer was running), restart.
const (
	changesBeforeKill = 10
	changesWhileDown  = 3
	killAfter         = 150 * time.Millisecond
)

// copyManifests copies the manifest folder for a second, fresh pier.
func copyManifests(t *testing.T, from string) string {
	t.Helper()
	to := harness.ShortTempDir(t)
	files, _ := filepath.Glob(filepath.Join(from, "*.yaml"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		write(t, to, filepath.Base(f), string(b))
	}
	return to
}

// waitSynced waits until the set of load balancers is names and each serves
// its current spec; it returns them by name.
func waitSynced(t *testing.T, p *harness.Pier, names []string) map[string]model.LoadBalancer {
	t.Helper()
	out := map[string]model.LoadBalancer{}
	harness.WaitFor(t, 20*time.Second, "load balancers "+strings.Join(names, ", ")+" serving", func() bool {
		lbs, err := loadBalancers(p)
		if err != nil || len(lbs) != len(names) {
			return false
		}
		clear(out)
		for _, lb := range lbs {
			if !lb.Serving() || !slices.Contains(names, lb.Name) {
				return false
			}
			out[lb.Name] = lb
		}
		return true
	})
	return out
}

// normalized is a haproxy.conf with what differs between two state dirs
// by construction (state dir, UUID, VIP, FIP) replaced by placeholders.
func normalized(t *testing.T, state string, lb model.LoadBalancer) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(state, "haproxy", lb.UUID, "haproxy.conf"))
	if err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer(state, "<STATE>", lb.UUID, "<UUID>", lb.VIP+":", "<VIP>:", lb.FIP+":", "<FIP>:")
	return r.Replace(string(b))
}

// TestRestartDuringChurn: pier killed in the middle of a burst of changes
// like TestConfigChurn's and restarted converges on exactly what a fresh pier renders, with at
// most one reload per load balancer and no error on unchanged routes.
func TestRestartDuringChurn(t *testing.T) {
	e := newEnv(t)
	for _, svc := range []string{"stable", "changing", "other"} {
		write(t, e.manifests, svc+"-svc.yaml", backendYAML(svc, pods(startEchos(t, svc, 1))))
	}
	write(t, e.manifests, "stable.yaml", simple("stable", "", "stable.example", "stable").yaml())
	write(t, e.manifests, "stable2.yaml", simple("stable2", "shared", "stable2.example", "stable").yaml())
	c := newChurn(t, e.manifests, "") // extras get load balancers of their own
	first := e.start(nil)
	standalone := lbNamed(t, first, ns+"/stable")
	shared := lbNamed(t, first, sharedGroupName)

	l := startLoad(
		target{name: "stable", addr: standalone.VIP, port: first.HTTPPort, host: "stable.example", path: "/"},
		target{name: "stable2", addr: shared.VIP, port: first.HTTPPort, host: "stable2.example", path: "/"})
	time.Sleep(time.Second)
	var extra1 model.LoadBalancer
	for i := range changesBeforeKill {
		if i > 0 {
			time.Sleep(churnInterval)
		}
		if c.step(); i == 7 {
			extra1 = lbNamed(t, first, ns+"/extra-1")
		}
	}
	// Mid-apply: after the watcher's debounce, while the agent reloads.
	time.Sleep(killAfter)
	first.Kill()
	var down []string
	for range changesWhileDown {
		down = append(down, c.step())
		time.Sleep(churnInterval)
	}
	// Read after the downtime: a reload the killed pier had started has
	// finished by now and is not counted against the new one.
	before := map[string]int{} // HAProxy's own reload count per running load balancer
	dirs, _ := filepath.Glob(filepath.Join(e.state, "haproxy", "*"))
	for _, dir := range dirs {
		if n, err := masterReloads(dir); err == nil {
			before[filepath.Base(dir)] = n
		}
	}
	second := e.start(first)
	names := []string{ns + "/stable", sharedGroupName}
	got := waitSynced(t, second, names)
	time.Sleep(time.Second)
	all := l.stop()
	total := report(t, all)
	t.Logf("restart during churn: %d changes before the kill, %v while down; %d requests; the new pier counted %v reloads ok",
		changesBeforeKill, down, total, reloadsOK(second))
	requireNoErrors(t, all)
	checkReloads(t, e.state, before)
	checkOrphans(t, e.state, got, extra1)
	compareFresh(t, e, got, names)
}

// checkReloads: at most one reload per load balancer between the kill and
// the end of the sync, by HAProxy's own count.
func checkReloads(t *testing.T, state string, before map[string]int) {
	t.Helper()
	for uuid, n := range before {
		after, err := masterReloads(filepath.Join(state, "haproxy", uuid))
		if err != nil {
			continue // stopped: checkOrphans says whether it should have been
		}
		t.Logf("restart during churn: %s: %d reloads after the restart", uuid, after-n)
		if after-n > 1 {
			t.Errorf("%s: %d reloads after the restart, want ≤ 1", uuid, after-n)
		}
	}
}

// checkOrphans: no HAProxy runs for a load balancer that no longer exists
// (extra-1 was deleted while pier was down).
func checkOrphans(t *testing.T, state string, lbs map[string]model.LoadBalancer, deleted model.LoadBalancer) {
	t.Helper()
	live := map[string]bool{}
	for _, lb := range lbs {
		live[lb.UUID] = true
	}
	dirs, _ := filepath.Glob(filepath.Join(state, "haproxy", "*"))
	for _, dir := range dirs {
		uuid := filepath.Base(dir)
		if m, w := haproxyProcs(dir); !live[uuid] && (m != 0 || len(w) > 0) {
			t.Errorf("HAProxy master %d, workers %v still run for %s, which is no longer a load balancer "+
				"(%s was deleted while pier was down)", m, w, uuid, deleted.Name)
		}
	}
}

// compareFresh runs a second pier on a copy of the manifests with a fresh
// state dir and other pools, and compares each load balancer's rendered
// config with the restarted pier's, byte for byte once the state dir,
// UUID, VIP and FIP are set aside.
func compareFresh(t *testing.T, e *env, got map[string]model.LoadBalancer, names []string) {
	t.Helper()
	fresh := &env{t: t, manifests: copyManifests(t, e.manifests), state: harness.ShortTempDir(t)}
	t.Cleanup(func() { killLeftovers(t, fresh.state) })
	// Same ports (they are in the config), other addresses: both bind.
	p := harness.StartPier(t, harness.Options{Manifests: fresh.manifests, State: fresh.state,
		HTTPPort: e.pier.HTTPPort, HTTPSPort: e.pier.HTTPSPort,
		ExtraArgs: []string{"--haproxy-processes", "0", "--internal-pool", "127.30.0.0/16", "--public-pool", "127.40.0.0/16"}})
	want := waitSynced(t, p, names)
	for _, name := range names {
		a, b := normalized(t, e.state, got[name]), normalized(t, fresh.state, want[name])
		t.Logf("restart during churn: %s: restarted pier config %s, fresh pier config %s", name, e.configHash(got[name].UUID), fresh.configHash(want[name].UUID))
		if a != b {
			t.Errorf("%s: the restarted pier's haproxy.conf differs from a fresh render:\n--- restarted\n%s\n--- fresh\n%s", name, a, b)
		}
	}
}
