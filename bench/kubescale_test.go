package bench

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// kubeScaleRun is one run of TestKubeScale: n Ingresses present, m nodes.
type kubeScaleRun struct {
	Ingresses    int    `json:"ingresses"` // present at the cold start, flip's included
	Nodes        int    `json:"nodes"`
	HAProxyNodes int    `json:"haproxy_nodes"` // the nodes load balancers are placed on; the others' agents are idle
	APIRate      string `json:"api_rate"`      // the pier processes' --kube-api-qps/--kube-api-burst, "default" for none
	// SetupSec is creating the Ingresses, Services and EndpointSlices
	// (the benchmark's own client, 16 at a time) before pier starts.
	SetupSec  float64       `json:"setup_s"`
	Cold      kubeColdStart `json:"cold_start"`
	Baseline  apiPhase      `json:"baseline"` // the API server alone, before pier starts
	Rest      apiPhase      `json:"at_rest"`
	RestCPU   kubeCPU       `json:"at_rest_cpu"`
	Endpoint  *kubeSeries   `json:"endpoint,omitempty"`
	New       *kubeSeries   `json:"new_ingress,omitempty"`
	Memory    kubeMemory    `json:"memory"`
	Storage   kubeStorage   `json:"storage"`
	LoadStart float64       `json:"load_avg_start"`
	LoadEnd   float64       `json:"load_avg_end"`
	Summary   string        `json:"summary"` // the kube-scale: line
}

// kubeColdStart is everything started at once with the objects present:
// the times, from the first process started, until the controller had
// stored every LoadBalancer, both nodes of each served it, every Ingress
// had its status, and no LoadBalancer was written for settleQuiet.
type kubeColdStart struct {
	StoredSec     float64        `json:"all_stored_s"`
	ServedSec     float64        `json:"all_served_both_nodes_s"`
	StatusesSec   float64        `json:"all_statuses_s"`
	SettledSec    float64        `json:"settled_s"`
	Complete      bool           `json:"complete"` // false: the limit came first
	Statuses      int            `json:"statuses"` // Ingresses with a status at the end
	Progress      []kubeStep     `json:"progress"`
	API           apiPhase       `json:"api"`
	LimitSec      float64        `json:"limit_s"`
	ProcessesSec  float64        `json:"processes_up_s"` // every pier process answering on its API
	SettleQuietMs float64        `json:"settle_quiet_ms"`
	Leader        string         `json:"leader"`
	CPU           kubeCPU        `json:"cpu"`
	Placements    map[string]int `json:"active_per_node"`
}

// kubeStep is the cold start's progress at one moment.
type kubeStep struct {
	Sec        float64 `json:"s"`
	Stored     int     `json:"stored"`
	ServedBoth int     `json:"served_both"`
	Statuses   int     `json:"statuses"`
}

// kubeSeries is one kind of change, sampled.
type kubeSeries struct {
	Kind    string       `json:"kind"`
	Samples []kubeSample `json:"samples"`
	// Served: → served at the holder (endpoint: the new member answers;
	// new Ingress: the first 200); Settled: → the last API write of the
	// change (the LoadBalancer written by the controller, then reported
	// by both nodes at the new spec); Status (new Ingress): → the
	// Ingress's status.
	ServedP50  float64  `json:"served_p50_ms"`
	ServedP99  float64  `json:"served_p99_ms"`
	SettledP50 float64  `json:"settled_p50_ms"`
	SettledP99 float64  `json:"settled_p99_ms"`
	StatusP50  float64  `json:"status_p50_ms,omitempty"`
	StatusP99  float64  `json:"status_p99_ms,omitempty"`
	StoredP50  float64  `json:"stored_p50_ms"`
	API        apiPhase `json:"api"`
}

type kubeSample struct {
	N         int     `json:"n"`
	Holder    string  `json:"holder"`
	StoredMs  float64 `json:"stored_ms"` // → the controller's LoadBalancer write arrived at the benchmark's watch
	ServedMs  float64 `json:"served_ms"`
	StatusMs  float64 `json:"status_ms,omitempty"`
	SettledMs float64 `json:"settled_ms"`
	Polls     int     `json:"polls"`
}

func (s *kubeSeries) summarise() {
	var served, settled, status, stored []float64
	for _, x := range s.Samples {
		served, settled, stored = append(served, x.ServedMs), append(settled, x.SettledMs), append(stored, x.StoredMs)
		status = append(status, x.StatusMs)
	}
	s.ServedP50, s.ServedP99 = nearestRank(served, 50), nearestRank(served, 99)
	s.SettledP50, s.SettledP99 = nearestRank(settled, 50), nearestRank(settled, 99)
	s.StatusP50, s.StatusP99 = nearestRank(status, 50), nearestRank(status, 99)
	s.StoredP50 = nearestRank(stored, 50)
}

// kubeCounts is PIER_BENCH_KUBE_SIZES or PIER_BENCH_KUBE_NODES: counts
// separated by commas, or def.
func kubeCounts(t *testing.T, name string, def []int) []int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("%s: bad count %q", name, f)
		}
		out = append(out, n)
	}
	return out
}

// TestKubeScale measures pier's Kubernetes mode at n Ingresses and m
// nodes (kubeworld_test.go says what runs): the cold start until every
// Ingress has its status, the API requests at rest, an endpoint change
// and a new Ingress (to served at the holder, to status, to the last API
// write), memory and the LoadBalancer objects' size. One world per run.
func TestKubeScale(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "ip")
	pierBin(t)
	sizes := kubeCounts(t, "PIER_BENCH_KUBE_SIZES", []int{100, 1000, 3000, 10000})
	nodes := kubeCounts(t, "PIER_BENCH_KUBE_NODES", []int{10, 50})
	haproxyNodes := scaleCount(t, "PIER_BENCH_KUBE_HAPROXY_NODES", 10)
	endpoints := scaleCount(t, "PIER_BENCH_KUBE_ENDPOINT_SAMPLES", 100)
	newIngresses := scaleCount(t, "PIER_BENCH_KUBE_NEW_SAMPLES", 20)
	rest := time.Duration(scaleCount(t, "PIER_BENCH_KUBE_REST_S", 30)) * time.Second
	limit := time.Duration(scaleCount(t, "PIER_BENCH_KUBE_COLD_LIMIT_S", 720)) * time.Second
	if quick() {
		sizes = kubeCounts(t, "PIER_BENCH_KUBE_SIZES", []int{100})
		nodes = kubeCounts(t, "PIER_BENCH_KUBE_NODES", []int{3})
		haproxyNodes, endpoints, newIngresses, rest, limit = min(haproxyNodes, 2), 5, 3, 5*time.Second, 90*time.Second
	}
	rate, rateName := kubeRate(t)
	var runs []kubeScaleRun
	for _, m := range nodes {
		for _, n := range sizes {
			t.Run(fmt.Sprintf("%d-ingresses-%d-nodes", n, m), func(t *testing.T) {
				r := kubeScaleAt(t, kubeRunConfig{ingresses: n, nodes: m, haproxyNodes: min(m, haproxyNodes),
					endpoints: endpoints, newIngresses: newIngresses, rest: rest, limit: limit, rate: rate, rateName: rateName})
				runs = append(runs, r)
				writeJSON(t, out, "kube-scale.json", runs) // after each run: a later failure keeps the earlier ones
				fmt.Println(r.Summary)
			})
		}
	}
	for _, r := range runs {
		fmt.Println(r.Summary)
	}
}

// kubeRate is PIER_BENCH_KUBE_API_RATE, "QPS/BURST" for every pier
// process (5/10 is client-go's own default), as flags.
func kubeRate(t *testing.T) ([]string, string) {
	s := os.Getenv("PIER_BENCH_KUBE_API_RATE")
	if s == "" {
		return nil, "default"
	}
	qps, burst, ok := strings.Cut(s, "/")
	if _, err := strconv.ParseFloat(qps, 32); err != nil || !ok {
		t.Fatalf("PIER_BENCH_KUBE_API_RATE %q: want QPS/BURST", s)
	}
	if _, err := strconv.Atoi(burst); err != nil {
		t.Fatalf("PIER_BENCH_KUBE_API_RATE %q: want QPS/BURST", s)
	}
	return []string{"--kube-api-qps", qps, "--kube-api-burst", burst}, s
}

type kubeRunConfig struct {
	ingresses, nodes, haproxyNodes int
	endpoints, newIngresses        int
	rest, limit                    time.Duration
	rate                           []string
	rateName                       string
}

func kubeScaleAt(t *testing.T, c kubeRunConfig) kubeScaleRun {
	r := kubeScaleRun{Nodes: c.nodes, HAProxyNodes: c.haproxyNodes, APIRate: c.rateName, LoadStart: loadAvg()}
	w := newKubeWorld(t, c.haproxyNodes, c.nodes-c.haproxyNodes, c.rate)
	ctx := t.Context()
	began := time.Now()
	names := w.createObjects(ctx, c.ingresses)
	r.Ingresses, r.SetupSec = len(names), time.Since(began).Seconds()
	t.Logf("%d Ingresses with their Services and EndpointSlices created in %.1f s", r.Ingresses, r.SetupSec)
	k := w.track(t)

	baseline := min(c.rest, 20*time.Second)
	a := w.sampleAPI(ctx)
	time.Sleep(baseline)
	r.Baseline = phase(a, w.sampleAPI(ctx), nil, 0, c.nodes)
	t.Logf("baseline (the API server alone, %s): %s", baseline, r.Baseline)

	r.Cold = w.coldStart(t, k, names, c)
	t.Logf("cold start: all stored %.1f s, served by both nodes %.1f s, every status %.1f s, settled %.1f s (complete %v); %s; CPU %+v",
		r.Cold.StoredSec, r.Cold.ServedSec, r.Cold.StatusesSec, r.Cold.SettledSec, r.Cold.Complete, r.Cold.API, r.Cold.CPU)
	if !r.Cold.Complete {
		t.Errorf("%d Ingresses, %d nodes: %d of %d statuses within %s; without: %s; not served by every node they are placed on: %s",
			r.Ingresses, c.nodes, r.Cold.Statuses, r.Ingresses, c.limit, k.withoutStatus(names, 10), k.notServed(10))
	}

	a, cpu0 := w.sampleAPI(ctx), w.sampleCPU()
	time.Sleep(c.rest)
	r.Rest = phase(a, w.sampleAPI(ctx), &r.Baseline, 0, c.nodes)
	r.RestCPU = w.cpuBetween(cpu0, w.sampleCPU(), r.Cold.Leader)
	t.Logf("at rest (%s): %s; %.2f writes/s per node; CPU %+v", c.rest, r.Rest, r.Rest.WritesPerSecPerNode, r.RestCPU)
	// At rest nothing changes, so nothing may write a LoadBalancer: a
	// status tick or heartbeat that did would cost a write per load
	// balancer and node.
	for _, q := range r.Rest.Requests {
		if writeVerbs[q.Verb] && strings.HasPrefix(q.Resource, "loadbalancers") {
			t.Errorf("at rest: %.0f %s %s in %s, want none", q.Count, q.Verb, q.Resource, c.rest)
		}
	}
	r.Memory = w.memory(ctx)
	r.Storage = w.storage(ctx)
	t.Logf("memory: %+v; storage: %+v", r.Memory, r.Storage)

	// The series need the flip Ingress served, not every one: a cold
	// start that ran out of time still measures them.
	flip := k.lbOf(flipNS + "/flip")
	ready := flip != nil && servedEverywhere(flip)
	if ready && c.endpoints > 0 {
		s := w.endpointSeries(t, k, c.endpoints, r.Baseline.plus(r.Rest))
		r.Endpoint = &s
	}
	if ready && c.newIngresses > 0 {
		s := w.newIngressSeries(t, k, c.newIngresses, r.Baseline.plus(r.Rest))
		r.New = &s
	}
	peak := w.memory(ctx)
	r.Memory.ControllerLeaderPeakRSS, r.Memory.AgentPeakRSS = peak.ControllerLeaderPeakRSS, peak.AgentPeakRSS
	r.Memory.APIServerPeak = peak.APIServerPeak
	r.LoadEnd = loadAvg()
	var epP99, newP99 float64
	if r.Endpoint != nil {
		epP99 = r.Endpoint.ServedP99
	}
	if r.New != nil {
		newP99 = r.New.ServedP99
	}
	r.Summary = fmt.Sprintf("kube-scale: ingresses=%d nodes=%d statuses_s=%.1f endpoint_p99_ms=%.1f new_p99_ms=%.1f writes_per_s_per_node=%.2f controller_rss_mib=%.0f",
		r.Ingresses, c.nodes, r.Cold.StatusesSec, epP99, newP99, r.Rest.WritesPerSecPerNode, r.Memory.ControllerLeaderRSS)
	if c.rateName != "default" {
		r.Summary += " api_rate=" + c.rateName
	}
	return r
}

// settleQuiet is how long no LoadBalancer may change for the cold start
// to count as settled.
const settleQuiet = 5 * time.Second

func (w *kubeWorld) coldStart(t *testing.T, k *kubeTracker, names []string, c kubeRunConfig) kubeColdStart {
	ctx := t.Context()
	cs := kubeColdStart{LimitSec: c.limit.Seconds(), SettleQuietMs: ms(settleQuiet)}
	a, cpu0 := w.sampleAPI(ctx), w.sampleCPU()
	t0 := time.Now()
	w.startAgents()
	w.startControllers(c.ingresses + 1000)
	w.waitUp()
	cs.ProcessesSec = time.Since(t0).Seconds()
	since := func(at time.Time) float64 { return at.Sub(t0).Seconds() }
	want := len(names)
	deadline := t0.Add(c.limit)
	lastStep := time.Time{}
	for {
		stored, served := k.progress()
		statuses, lastStatus := k.statuses(names)
		now := time.Now()
		if cs.StoredSec == 0 && stored >= want {
			cs.StoredSec = since(now)
		}
		if cs.ServedSec == 0 && served >= want {
			cs.ServedSec = since(now)
		}
		if cs.StatusesSec == 0 && statuses == want {
			cs.StatusesSec = since(lastStatus)
		}
		if now.Sub(lastStep) >= time.Second {
			cs.Progress = append(cs.Progress, kubeStep{Sec: since(now), Stored: stored, ServedBoth: served, Statuses: statuses})
			lastStep = now
		}
		cs.Statuses = statuses
		if cs.StatusesSec > 0 && cs.ServedSec > 0 {
			cs.Complete = true
			break
		}
		if now.After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Settled: no LoadBalancer event for settleQuiet (or the limit).
	for cs.Complete && time.Since(k.lastEvent()) < settleQuiet && time.Now().Before(deadline.Add(time.Minute)) {
		time.Sleep(100 * time.Millisecond)
	}
	cs.SettledSec = since(k.lastEvent())
	cs.API = phase(a, w.sampleAPI(ctx), nil, 0, c.nodes)
	leader, _ := w.leader(ctx)
	cs.Leader = leader.name
	cs.CPU = w.cpuBetween(cpu0, w.sampleCPU(), leader.name)
	cs.Placements = map[string]int{}
	k.mu.Lock()
	for _, lb := range k.lbs {
		cs.Placements[lb.Placement.Active]++
	}
	k.mu.Unlock()
	return cs
}

// nodeNS is the network namespace of a lab node.
func (w *kubeWorld) nodeNS(t *testing.T, node string) string {
	for _, h := range w.lab.Nodes {
		if h.Name == node {
			return h.NS
		}
	}
	t.Fatalf("node %q is not a HAProxy node", node)
	return ""
}

// endpointSeries replaces the flip Service's only member by the other
// one, samples times, and times each from the EndpointSlice write to the
// first answer from the new member through the active node's HAProxy,
// and to the last API write it caused: both nodes' reports at the new
// spec.
func (w *kubeWorld) endpointSeries(t *testing.T, k *kubeTracker, samples int, background *apiPhase) kubeSeries {
	ctx := t.Context()
	s := kubeSeries{Kind: kindEndpoint}
	flip := flipNS + "/flip"
	lb := k.lbOf(flip)
	holder := lb.Placement.Active
	client := nsClient(w.nodeNS(t, holder))
	served := func(member int) bool {
		code, reply, _, err := harness.Get(client, lb.VIP, 80, flipHost, "/")
		return err == nil && code == 200 && reply.Pod == flipMembers[member].pod
	}
	a := w.sampleAPI(ctx)
	cur := 0
	for i := 1; i <= samples; i++ {
		if !served(cur) {
			t.Fatalf("endpoint sample %d: %s is not served by %s at %s before the change", i, flipHost, flipMembers[cur].pod, holder)
		}
		next := 1 - cur
		addr := w.flipAddr(next)
		patch := fmt.Sprintf(`{"endpoints":[{"addresses":[%q],"conditions":{"ready":true},"targetRef":{"kind":"Pod","namespace":%q,"name":%q}}]}`,
			addr, flipNS, flipMembers[next].pod)
		t0 := time.Now()
		if _, err := w.cs.DiscoveryV1().EndpointSlices(flipNS).Patch(ctx, "flip-a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		smp := kubeSample{N: i, Holder: holder}
		for smp.Polls = 1; !served(next); smp.Polls++ {
			if time.Since(t0) > 60*time.Second {
				t.Fatalf("endpoint sample %d: not served within 60 s", i)
			}
			time.Sleep(time.Millisecond)
		}
		smp.ServedMs = ms(time.Since(t0))
		_, storedAt := k.waitLB(t, flip, 60*time.Second, func(lb *model.LoadBalancer) bool { return hasMember(lb, addr) })
		_, settledAt := k.waitLB(t, flip, 60*time.Second, func(lb *model.LoadBalancer) bool {
			return hasMember(lb, addr) && servedEverywhere(lb)
		})
		smp.StoredMs, smp.SettledMs = ms(storedAt.Sub(t0)), ms(settledAt.Sub(t0))
		s.Samples = append(s.Samples, smp)
		cur = next
		time.Sleep(300 * time.Millisecond) // nothing of this change is left when the next one is written
	}
	s.API = phase(a, w.sampleAPI(ctx), background, samples, 0)
	s.summarise()
	t.Logf("endpoint change → served at %s p50 %.1f ms p99 %.1f ms; → stored p50 %.1f ms; → settled p50 %.1f ms p99 %.1f ms; per change: %.1f writes, %.1f reads (%s)",
		holder, s.ServedP50, s.ServedP99, s.StoredP50, s.SettledP50, s.SettledP99, s.API.WritesPerChange, s.API.ReadsPerChange, s.API)
	return s
}

func hasMember(lb *model.LoadBalancer, addr string) bool {
	for _, p := range lb.Pools {
		for _, m := range p.Members {
			if m.Address == addr {
				return true
			}
		}
	}
	return false
}

// newIngressSeries creates Ingresses with a load balancer of their own
// (their Service and EndpointSlice first) and times each from the
// Ingress's creation to its first 200 through its active node's HAProxy,
// to its status, and to the last API write (both nodes' reports).
func (w *kubeWorld) newIngressSeries(t *testing.T, k *kubeTracker, samples int, background *apiPhase) kubeSeries {
	ctx := t.Context()
	s := kubeSeries{Kind: kindNewIngress}
	a := w.sampleAPI(ctx)
	for i := 1; i <= samples; i++ {
		name := fmt.Sprintf("new-%03d", i)
		host, key := name+".fresh.bench.example", kubeFreshNS+"/"+name
		svc, es := Backend(kubeFreshNS, name, int32(w.freshPort), w.lab.HostAddr.String())
		w.must(w.createBackend(ctx, svc, es))
		// The backend's own snapshot and debounce are over before the
		// Ingress comes: the new Ingress alone is measured.
		time.Sleep(300 * time.Millisecond)
		t0 := time.Now()
		w.must(w.createIngress(ctx, Ingress(kubeFreshNS, name, i, Rule(host, Prefix("/", name)))))
		lb, storedAt := k.waitLB(t, key, 60*time.Second, func(lb *model.LoadBalancer) bool {
			return lb.VIP != "" && lb.Placement.Active != ""
		})
		smp := kubeSample{N: i, Holder: lb.Placement.Active, StoredMs: ms(storedAt.Sub(t0))}
		client := nsClient(w.nodeNS(t, lb.Placement.Active))
		for smp.Polls = 1; ; smp.Polls++ {
			code, reply, _, err := harness.Get(client, lb.VIP, 80, host, "/")
			if err == nil && code == http.StatusOK && reply.Pod == "fresh-pod" {
				break
			}
			if time.Since(t0) > 60*time.Second {
				t.Fatalf("new Ingress %s: no 200 within 60 s (last %d, %v)", name, code, err)
			}
			time.Sleep(time.Millisecond)
		}
		smp.ServedMs = ms(time.Since(t0))
		smp.StatusMs = ms(k.waitStatus(t, key, 60*time.Second).Sub(t0))
		_, settledAt := k.waitLB(t, key, 60*time.Second, servedEverywhere)
		smp.SettledMs = ms(settledAt.Sub(t0))
		s.Samples = append(s.Samples, smp)
		time.Sleep(300 * time.Millisecond)
	}
	s.API = phase(a, w.sampleAPI(ctx), background, samples, 0)
	s.summarise()
	t.Logf("new Ingress → stored p50 %.1f ms; → first 200 p50 %.1f ms p99 %.1f ms; → status p50 %.1f ms p99 %.1f ms; → settled p50 %.1f ms p99 %.1f ms; per new Ingress: %.1f writes, %.1f reads (%s)",
		s.StoredP50, s.ServedP50, s.ServedP99, s.StatusP50, s.StatusP99, s.SettledP50, s.SettledP99, s.API.WritesPerChange, s.API.ReadsPerChange, s.API)
	return s
}
