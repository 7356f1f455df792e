package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"pier.dev/pier/internal/lab"
	kubestore "pier.dev/pier/internal/store/kube"
)

// What TestKubeScale counts and how: API requests from the API server's
// own counter, apiserver_request_total, read before and after each
// phase; the benchmark's own requests, counted by its client, are taken
// off, and so is, at rest, the API server's background (its own identity
// Lease and controllers), measured before pier started.

// reqKey is a request kind as apiserver_request_total labels it: verb
// (GET, LIST, WATCH, POST, PUT, PATCH, APPLY, DELETE, DELETECOLLECTION)
// and resource, with /subresource when there is one.
type reqKey struct {
	Verb     string `json:"verb"`
	Resource string `json:"resource"`
}

type requestCounts map[reqKey]float64

func (c requestCounts) clone() requestCounts {
	out := make(requestCounts, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// writeVerbs are the verbs that change what etcd holds.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "APPLY": true, "DELETE": true, "DELETECOLLECTION": true}

// requestCounter counts the benchmark's own requests, keyed as the API
// server keys them.
type requestCounter struct {
	mu sync.Mutex
	n  requestCounts
}

func newRequestCounter() *requestCounter { return &requestCounter{n: requestCounts{}} }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return countingTransport{c: c, next: rt}
}

func (c *requestCounter) snapshot() requestCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n.clone()
}

type countingTransport struct {
	c    *requestCounter
	next http.RoundTripper
}

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if k, ok := requestKind(r); ok {
		t.c.mu.Lock()
		t.c.n[k]++
		t.c.mu.Unlock()
	}
	return t.next.RoundTrip(r)
}

// requestKind reads a resource request's verb and resource from its
// method and path (/api/v1/…, /apis/GROUP/VERSION/…), as the API server's
// request info does; other paths (/metrics) are not resource requests.
func requestKind(r *http.Request) (reqKey, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return reqKey{}, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	resource, named := parts[0], len(parts) > 1
	if len(parts) > 2 {
		resource += "/" + parts[2]
	}
	verb := ""
	switch r.Method {
	case http.MethodGet:
		switch {
		case named:
			verb = "GET"
		case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
			verb = "WATCH"
		default:
			verb = "LIST"
		}
	case http.MethodPost, http.MethodPut:
		verb = r.Method
	case http.MethodPatch:
		verb = "PATCH"
		if strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch") {
			verb = "APPLY"
		}
	case http.MethodDelete:
		verb = "DELETE"
		if !named {
			verb = "DELETECOLLECTION"
		}
	default:
		return reqKey{}, false
	}
	return reqKey{Verb: verb, Resource: resource}, true
}

// apiSample is both counters at one moment.
type apiSample struct {
	at        time.Time
	server    requestCounts
	conflicts float64 // answered 409 Conflict
	bench     requestCounts
}

var labelPattern = regexp.MustCompile(`(\w+)="([^"]*)"`)

// sampleAPI reads the API server's counters and the benchmark's.
func (w *kubeWorld) sampleAPI(ctx context.Context) apiSample {
	w.t.Helper()
	s := apiSample{at: time.Now(), server: requestCounts{}, bench: w.counter.snapshot()}
	text := w.apiserverMetrics(ctx)
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(rest, '}')
		if end < 0 {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest[end+1:]), 64)
		if err != nil {
			continue
		}
		labels := map[string]string{}
		for _, m := range labelPattern.FindAllStringSubmatch(rest[:end], -1) {
			labels[m[1]] = m[2]
		}
		if labels["resource"] == "" {
			continue // /metrics, /readyz, …
		}
		k := reqKey{Verb: labels["verb"], Resource: labels["resource"]}
		if sub := labels["subresource"]; sub != "" {
			k.Resource += "/" + sub
		}
		s.server[k] += v
		if labels["code"] == "409" {
			s.conflicts += v
		}
	}
	return s
}

// apiserverMetrics is the API server's /metrics text (as the admin; not a
// resource request, so not counted).
func (w *kubeWorld) apiserverMetrics(ctx context.Context) string {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	b, err := w.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		w.t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	return string(b)
}

// metricValue sums the samples of metric name whose labels contain every
// filter (`resource="loadbalancers.pier.dev"`).
func metricValue(text, name string, filters ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') || !containsEvery(line, filters) {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

func containsEvery(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// apiPhase is what pier asked of the API server over one phase: the API
// server's count less the benchmark's own requests (and, for phases at
// rest, less its background at the baseline's rate).
type apiPhase struct {
	DurationSec float64      `json:"duration_s"`
	Changes     int          `json:"changes,omitempty"`
	Requests    []apiRequest `json:"requests"`
	Reads       float64      `json:"reads"`
	Writes      float64      `json:"writes"`
	Conflicts   float64      `json:"conflicts_409"`
	// Per second, per second and node, per change (when Changes > 0).
	WritesPerSec        float64 `json:"writes_per_s"`
	ReadsPerSec         float64 `json:"reads_per_s"`
	WritesPerSecPerNode float64 `json:"writes_per_s_per_node"`
	WritesPerChange     float64 `json:"writes_per_change,omitempty"`
	ReadsPerChange      float64 `json:"reads_per_change,omitempty"`
}

type apiRequest struct {
	reqKey
	Count     float64 `json:"count"`
	PerSec    float64 `json:"per_s"`
	PerChange float64 `json:"per_change,omitempty"`
}

// phase is the requests between a and b. baseline, when set, is the API
// server's own background, taken off at its rate.
func phase(a, b apiSample, baseline *apiPhase, changes, nodes int) apiPhase {
	p := apiPhase{DurationSec: b.at.Sub(a.at).Seconds(), Changes: changes, Conflicts: b.conflicts - a.conflicts}
	background := map[reqKey]float64{}
	if baseline != nil {
		for _, r := range baseline.Requests {
			background[r.reqKey] = r.PerSec * p.DurationSec
		}
	}
	keys := map[reqKey]bool{}
	for k := range b.server {
		keys[k] = true
	}
	for k := range keys {
		n := (b.server[k] - a.server[k]) - (b.bench[k] - a.bench[k]) - background[k]
		if n < 0.5 {
			continue
		}
		r := apiRequest{reqKey: k, Count: n, PerSec: n / p.DurationSec}
		if changes > 0 {
			r.PerChange = n / float64(changes)
		}
		p.Requests = append(p.Requests, r)
		if writeVerbs[k.Verb] {
			p.Writes += n
		} else {
			p.Reads += n
		}
	}
	sort.Slice(p.Requests, func(i, j int) bool {
		if p.Requests[i].Count != p.Requests[j].Count {
			return p.Requests[i].Count > p.Requests[j].Count
		}
		return p.Requests[i].Resource+p.Requests[i].Verb < p.Requests[j].Resource+p.Requests[j].Verb
	})
	p.WritesPerSec, p.ReadsPerSec = p.Writes/p.DurationSec, p.Reads/p.DurationSec
	if nodes > 0 {
		p.WritesPerSecPerNode = p.WritesPerSec / float64(nodes)
	}
	if changes > 0 {
		p.WritesPerChange, p.ReadsPerChange = p.Writes/float64(changes), p.Reads/float64(changes)
	}
	return p
}

// plus is a background of both phases' rates: the API server's own and
// pier's at rest, which a change's phase takes off to count the change's
// own requests.
func (p apiPhase) plus(q apiPhase) *apiPhase {
	sum := map[reqKey]float64{}
	for _, x := range append(append([]apiRequest(nil), p.Requests...), q.Requests...) {
		sum[x.reqKey] += x.PerSec
	}
	out := &apiPhase{}
	for k, v := range sum {
		out.Requests = append(out.Requests, apiRequest{reqKey: k, PerSec: v})
	}
	return out
}

func (p apiPhase) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%.0f writes (%.2f/s), %.0f reads (%.2f/s), %.0f conflicts:", p.Writes, p.WritesPerSec, p.Reads, p.ReadsPerSec, p.Conflicts)
	for i, r := range p.Requests {
		if i == 12 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s %s %.0f", r.Verb, r.Resource, r.Count)
	}
	return b.String()
}

// ---- memory

// kubeMemory is the resident memory of every process of the world, MiB.
type kubeMemory struct {
	ControllerLeaderRSS     float64 `json:"controller_leader_rss_mib"`
	ControllerLeaderPeakRSS float64 `json:"controller_leader_peak_rss_mib"` // VmHWM
	ControllerStandbyRSS    float64 `json:"controller_standby_rss_mib"`
	// The HAProxy nodes' agents (largest and mean) and the idle ones
	// (mean); HAProxyPerNode is the mean over HAProxy nodes of the sum of
	// their HAProxy processes' RSS (shared pages counted in each).
	AgentMaxRSS     float64 `json:"agent_max_rss_mib"`
	AgentMeanRSS    float64 `json:"agent_mean_rss_mib"`
	AgentPeakRSS    float64 `json:"agent_peak_rss_mib"`
	IdleAgentRSS    float64 `json:"idle_agent_mean_rss_mib,omitempty"`
	HAProxyPerNode  float64 `json:"haproxy_per_node_rss_mib"`
	HAProxyProcs    int     `json:"haproxy_processes"`
	APIServerRSS    float64 `json:"kube_apiserver_rss_mib"`
	APIServerPeak   float64 `json:"kube_apiserver_peak_rss_mib"`
	EtcdRSS         float64 `json:"etcd_rss_mib"`
	AgentsMeasured  int     `json:"agents"`
	IdleAgentsCount int     `json:"idle_agents"`
}

func statusMiB(pid int, key string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return float64(kib(b, key)) / 1024
}

// childNamed is the pid of this process's child whose command is comm.
func childNamed(comm string) int {
	for _, pid := range children(os.Getpid()) {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if strings.TrimSpace(string(b)) == comm {
			return pid
		}
	}
	return 0
}

func (w *kubeWorld) memory(ctx context.Context) kubeMemory {
	leader, standby := w.leader(ctx)
	m := kubeMemory{
		ControllerLeaderRSS: statusMiB(leader.pid(), "VmRSS:"), ControllerLeaderPeakRSS: statusMiB(leader.pid(), "VmHWM:"),
		ControllerStandbyRSS: statusMiB(standby.pid(), "VmRSS:"),
	}
	if pid := childNamed("kube-apiserver"); pid > 0 {
		m.APIServerRSS, m.APIServerPeak = statusMiB(pid, "VmRSS:"), statusMiB(pid, "VmHWM:")
	}
	if pid := childNamed("etcd"); pid > 0 {
		m.EtcdRSS = statusMiB(pid, "VmRSS:")
	}
	w.mu.Lock()
	agents := append([]*kubeProc(nil), w.agents...)
	w.mu.Unlock()
	var sum, idle float64
	for i, a := range agents {
		rss := statusMiB(a.pid(), "VmRSS:")
		if i >= len(w.lab.Nodes) {
			idle += rss
			m.IdleAgentsCount++
			continue
		}
		sum += rss
		m.AgentsMeasured++
		m.AgentMaxRSS = max(m.AgentMaxRSS, rss)
		m.AgentPeakRSS = max(m.AgentPeakRSS, statusMiB(a.pid(), "VmHWM:"))
	}
	if m.AgentsMeasured > 0 {
		m.AgentMeanRSS = sum / float64(m.AgentsMeasured)
	}
	if m.IdleAgentsCount > 0 {
		m.IdleAgentRSS = idle / float64(m.IdleAgentsCount)
	}
	var haproxy float64
	for _, h := range w.lab.Nodes {
		for _, pid := range lab.PidsIn(h.NS, "haproxy") {
			haproxy += statusMiB(pid, "VmRSS:")
			m.HAProxyProcs++
		}
	}
	m.HAProxyPerNode = haproxy / float64(len(w.lab.Nodes))
	return m
}

// ---- storage

// kubeStorage is what the LoadBalancer objects take in the API server.
type kubeStorage struct {
	Objects int `json:"load_balancers"`
	// JSONBytes is the sum of the objects' sizes as the API server
	// serves them (JSON, managedFields included): what etcd holds for a
	// custom resource, which is stored as JSON.
	JSONBytes     int64 `json:"json_bytes"`
	MeanBytes     int64 `json:"mean_bytes"`
	MaxBytes      int64 `json:"max_bytes"`
	StatusBytes   int64 `json:"status_bytes"` // of JSONBytes, the status sections
	ManagedFields int64 `json:"managed_fields_bytes"`
	// EtcdDBBytes is apiserver_storage_size_bytes: etcd's database file,
	// everything in it (Ingresses, Services, EndpointSlices, history not
	// yet compacted).
	EtcdDBBytes float64 `json:"etcd_db_bytes"`
}

func (w *kubeWorld) storage(ctx context.Context) kubeStorage {
	w.t.Helper()
	dyn, err := dynamic.NewForConfig(w.cfg)
	w.must(err)
	var s kubeStorage
	opts := metav1.ListOptions{Limit: 500}
	for {
		page, err := dyn.Resource(kubestore.Resource).List(ctx, opts)
		w.must(err)
		for _, item := range page.Items {
			b, err := json.Marshal(item.Object)
			w.must(err)
			s.Objects++
			s.JSONBytes += int64(len(b))
			s.MaxBytes = max(s.MaxBytes, int64(len(b)))
			if st, ok := item.Object["status"]; ok {
				sb, _ := json.Marshal(st)
				s.StatusBytes += int64(len(sb))
			}
			mf, _ := json.Marshal(item.GetManagedFields())
			s.ManagedFields += int64(len(mf))
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	if s.Objects > 0 {
		s.MeanBytes = s.JSONBytes / int64(s.Objects)
	}
	s.EtcdDBBytes = metricValue(w.apiserverMetrics(ctx), "apiserver_storage_size_bytes")
	return s
}

// ---- CPU

// kubeCPU is the CPU time (user and system, seconds) the processes spent
// over a phase: for an agent on a HAProxy node, with its HAProxy
// processes and the `haproxy -c` runs it waited for.
type kubeCPU struct {
	ControllerLeader float64 `json:"controller_leader_s"`
	AgentMean        float64 `json:"agent_mean_s"`
	AgentMax         float64 `json:"agent_max_s"`
	IdleAgentMean    float64 `json:"idle_agent_mean_s,omitempty"`
	APIServer        float64 `json:"kube_apiserver_s"`
	Etcd             float64 `json:"etcd_s"`
	Benchmark        float64 `json:"benchmark_s"` // this process: the backends, the relay, the watches
	Sec              float64 `json:"duration_s"`
}

// cpuSample is every process's CPU ticks at one moment.
type cpuSample struct {
	at                    time.Time
	controllers, agents   map[string]int64
	apiserver, etcd, self int64
}

func ticksOf(pid int) int64 {
	t, err := statTicks(pid, statUtime, statStime, statCutime, statCstime)
	if err != nil {
		return 0
	}
	return t
}

func (w *kubeWorld) sampleCPU() cpuSample {
	s := cpuSample{at: time.Now(), controllers: map[string]int64{}, agents: map[string]int64{},
		apiserver: ticksOf(childNamed("kube-apiserver")), etcd: ticksOf(childNamed("etcd")), self: ticksOf(os.Getpid())}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.controllers {
		s.controllers[c.name] = ticksOf(c.pid())
	}
	for i, a := range w.agents {
		t := ticksOf(a.pid())
		if i < len(w.lab.Nodes) {
			for _, pid := range lab.PidsIn(w.lab.Nodes[i].NS, "haproxy") {
				if st, err := statTicks(pid, statUtime, statStime); err == nil {
					t += st
				}
			}
		}
		s.agents[a.name] = t
	}
	return s
}

// cpuBetween is what the processes spent from a to b; leader names the
// controller replica that leads.
func (w *kubeWorld) cpuBetween(a, b cpuSample, leader string) kubeCPU {
	sec := func(ticks int64) float64 { return float64(max(ticks, 0)) / 100 } // USER_HZ
	c := kubeCPU{ControllerLeader: sec(b.controllers[leader] - a.controllers[leader]),
		APIServer: sec(b.apiserver - a.apiserver), Etcd: sec(b.etcd - a.etcd), Benchmark: sec(b.self - a.self),
		Sec: b.at.Sub(a.at).Seconds()}
	w.mu.Lock()
	agents := append([]*kubeProc(nil), w.agents...)
	w.mu.Unlock()
	var sum, idle float64
	var n, nIdle int
	for i, p := range agents {
		v := sec(b.agents[p.name] - a.agents[p.name])
		if i >= len(w.lab.Nodes) {
			idle += v
			nIdle++
			continue
		}
		sum += v
		n++
		c.AgentMax = max(c.AgentMax, v)
	}
	if n > 0 {
		c.AgentMean = sum / float64(n)
	}
	if nIdle > 0 {
		c.IdleAgentMean = idle / float64(nIdle)
	}
	return c
}
