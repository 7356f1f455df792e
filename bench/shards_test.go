package bench

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// shardsRun is one `pier run` start with n Ingresses, one load balancer
// each.
type shardsRun struct {
	Processes int `json:"haproxy_processes_flag"` // --haproxy-processes (0: one per load balancer)
	Ingresses int `json:"ingresses"`
	// ServingSec: pier started → every Ingress answered 200 from its
	// backend through its own address.
	ServingSec float64 `json:"serving_s"`
	// Masters and HAProxyProcs count the HAProxy processes running below
	// the state folder once all serve: masters, and masters + workers.
	Masters      int `json:"haproxy_masters"`
	HAProxyProcs int `json:"haproxy_processes"`
	// HAProxyRSSKiB sums VmRSS (shared pages counted in each process) and
	// HAProxyPrivKiB the private pages of every HAProxy process.
	HAProxyRSSKiB  int `json:"haproxy_rss_kib"`
	HAProxyPrivKiB int `json:"haproxy_private_kib"`
	PierRSSKiB     int `json:"pier_rss_kib"`
	// Reloads is pier_haproxy_reloads_total{result="ok"} once all serve.
	Reloads float64 `json:"reloads"`
}

// shardIngresses is n Ingresses, one per namespace slot, each routing its
// host to a Service of its own whose endpoint is the echo at echoPort.
func shardIngresses(n, echoPort int) []runtime.Object {
	objs := []runtime.Object{IngressClass()}
	for i := 0; i < n; i++ {
		ns, name := fmt.Sprintf("team-%02d", i%50), fmt.Sprintf("app-%05d", i)
		svc, es := Backend(ns, name, int32(echoPort), "127.0.0.1")
		objs = append(objs, svc, es, Ingress(ns, name, i, Rule(name+".bench.example", Prefix("/", name))))
	}
	return objs
}

// TestShards starts n Ingresses with `pier run` packing them into 4
// HAProxy processes and, on a smaller count (2,000 processes at 1,000
// would not fit beside the other work on this machine), with one HAProxy
// process per load balancer: time until all serve, processes and memory.
func TestShards(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	n, perLB := 1000, 250
	if quick() {
		n, perLB = 100, 100
	}
	if s := os.Getenv("PIER_BENCH_SHARDS_N"); s != "" {
		n, _ = strconv.Atoi(s)
		perLB = min(perLB, n)
	}
	var runs []shardsRun
	for _, c := range []struct{ processes, n int }{{4, n}, {0, perLB}} {
		r := startShards(t, c.processes, c.n)
		t.Logf("--haproxy-processes %d, %d Ingresses: all serving in %.1f s; %d masters, %d HAProxy processes, HAProxy RSS %d MiB (private %d MiB), pier RSS %d MiB, %v reloads",
			r.Processes, r.Ingresses, r.ServingSec, r.Masters, r.HAProxyProcs, r.HAProxyRSSKiB/1024, r.HAProxyPrivKiB/1024, r.PierRSSKiB/1024, r.Reloads)
		runs = append(runs, r)
	}
	writeJSON(t, out, "shards.json", runs)
}

func startShards(t *testing.T, processes, n int) shardsRun {
	r := shardsRun{Processes: processes, Ingresses: n}
	echoPort := harness.StartEcho(t, "app", "app-pod")
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	harness.WriteFile(t, filepath.Join(manifests, "objects.json"), manifestList(t, shardIngresses(n, echoPort)...))

	start := time.Now()
	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state,
		ExtraArgs: []string{"--haproxy-processes", strconv.Itoa(processes), "--log-level", "info"}})
	defer p.Stop()
	waitAllServe(t, p, n)
	r.ServingSec = time.Since(start).Seconds()
	// pier's log goes beside the results: when each shard reloaded, with
	// how many changes, is in it.
	if b, err := os.ReadFile(p.LogPath); err == nil {
		_ = os.WriteFile(filepath.Join(outDir(t), fmt.Sprintf("shards-%d-%d.log", processes, n)), b, 0o644)
	}
	r.Reloads = p.Metric("pier_haproxy_reloads_total", `result="ok"`)
	for _, m := range processesBelow(state) {
		switch {
		case strings.HasPrefix(m.Role, "haproxy"):
			r.HAProxyProcs++
			r.HAProxyRSSKiB += m.VmRSSKiB
			r.HAProxyPrivKiB += m.PrivKiB
			if m.Role == "haproxy-master" {
				r.Masters++
			}
		case m.Role == "pier":
			r.PierRSSKiB += m.VmRSSKiB
		}
	}
	return r
}

// waitAllServe polls every Ingress not yet serving, in rounds, until all
// answer 200 from their backend through their own address. The agent
// applies them in its own order, so no single one is waited for.
func waitAllServe(t *testing.T, p *harness.Pier, n int) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	pending := make([]int, n)
	for i := range pending {
		pending[i] = i
	}
	deadline := time.Now().Add(15 * time.Minute)
	for len(pending) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d Ingresses not serving after 15 minutes", len(pending), n)
		}
		var still []int
		for _, i := range pending {
			if !serves(p, client, i) {
				still = append(still, i)
			}
		}
		pending = still
		time.Sleep(100 * time.Millisecond)
	}
}

// serves reports whether Ingress i answers from its backend.
func serves(p *harness.Pier, client *http.Client, i int) bool {
	ns, name := fmt.Sprintf("team-%02d", i%50), fmt.Sprintf("app-%05d", i)
	ing, err := p.Ingress(ns, name)
	if err != nil || ing.Ingress == nil || len(ing.Status.LoadBalancer.Ingress) == 0 {
		return false
	}
	code, reply, _, err := harness.Get(client, ing.Status.LoadBalancer.Ingress[0].IP, p.HTTPPort, name+".bench.example", "/")
	return err == nil && code == 200 && reply.Service == "app"
}

// processesBelow reads the memory of pier and every HAProxy process whose
// command line names state: other HAProxy processes on the machine are
// not ours. Role is pier, haproxy-master or haproxy-worker.
func processesBelow(state string) []procMem {
	var out []procMem
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		role := strings.TrimSpace(string(comm))
		if role != "pier" && role != "haproxy" {
			continue
		}
		m, err := readMem(pid, role)
		if err != nil || !strings.Contains(m.Cmdline, state) {
			continue
		}
		if role == "haproxy" {
			parent, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", m.ParentPID))
			m.Role = "haproxy-master"
			if strings.TrimSpace(string(parent)) == "haproxy" {
				m.Role = "haproxy-worker"
			}
		}
		out = append(out, m)
	}
	return out
}
