package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/echo"
	"pier.dev/pier/test/harness"
)

// Series kinds of the scale measurement.
const (
	kindEndpoint   = "endpoint"    // a Service's only member replaced by another
	kindNewIngress = "new-ingress" // a new Ingress, a load balancer of its own
	kindGroupJoin  = "group-join"  // a new Ingress joining a shared load balancer
)

// scaleSample is one manifest change and how long it took to reach
// traffic. Every time is measured from the rename that puts the manifest
// in place.
type scaleSample struct {
	N int `json:"n"`
	// EndToEndMs: → the first response from the new member (endpoint), or
	// the first 200 from the new Ingress's backend through its address.
	EndToEndMs float64 `json:"end_to_end_ms"`
	// AddressMs (new Ingress only): → pier logs the address it stored for
	// the new load balancer. The benchmark polls that address rather than
	// waiting for the Ingress status, which pier publishes once the
	// reload is confirmed (up to 25 ms later: status passes are paced).
	AddressMs float64 `json:"address_ms,omitempty"`
	// LoadedMs: → pier logs "manifests changed": the files source's
	// debounce and reading every manifest again.
	LoadedMs float64 `json:"manifests_loaded_ms"`
	// StoredMs: → pier logs "load balancer stored": translated, addresses
	// kept, written to the embedded store.
	StoredMs float64 `json:"stored_ms"`
	// AppliedMs: → pier logs "members updated without reload" (endpoint)
	// or "haproxy reloaded" (the others): translate, store, agent, the
	// check and the runtime update or the reload.
	AppliedMs float64 `json:"applied_ms"`
	// CheckMs and ReloadMs (reloads only) are check_took and reload_took
	// of that log line: the shard's `haproxy -c` and the reload until the
	// master lists the new worker.
	CheckMs  float64 `json:"pier_check_ms,omitempty"`
	ReloadMs float64 `json:"pier_reload_ms,omitempty"`
	// BareCheckMs (endpoint only) is the reference for the check pier
	// runs before a runtime update: `haproxy -c` of the global file, a
	// shard's process file and the changed load balancer's fragment, run
	// by the benchmark after the sample.
	BareCheckMs float64 `json:"bare_check_ms,omitempty"`
	Polls       int     `json:"polls"`
	// Reloads and RuntimeUpdates are the changes of pier's counters
	// pier_haproxy_reloads_total{result="ok"} and
	// pier_haproxy_runtime_updates_total{result="ok"} over the sample.
	Reloads        float64 `json:"reloads"`
	RuntimeUpdates float64 `json:"runtime_updates"`
	// Landed (new Ingress): pier logged "load balancer landed without
	// reload": the landing process served it, and its shard loads it
	// later with a deferred reload (counted in the series' FoldReloads,
	// not here). ReloadsBeforeServed are the reloads pier counted between
	// the rename and the first 200.
	Landed              bool    `json:"landed,omitempty"`
	ReloadsBeforeServed float64 `json:"reloads_before_first_200"`
}

// scaleSeries is the samples of one kind at one size, summarised.
type scaleSeries struct {
	Kind    string        `json:"kind"`
	Samples []scaleSample `json:"samples"`
	P50ms   float64       `json:"p50_ms"`
	P99ms   float64       `json:"p99_ms"` // nearest rank: with 50 samples, the largest
	MinMs   float64       `json:"min_ms"`
	MaxMs   float64       `json:"max_ms"`
	// LoadedP50ms and AppliedP50ms split the median: how much of it was
	// over when pier had read the manifests, and when HAProxy had the
	// change.
	LoadedP50ms  float64 `json:"manifests_loaded_p50_ms"`
	StoredP50ms  float64 `json:"stored_p50_ms"`
	AppliedP50ms float64 `json:"applied_p50_ms"`
	// CheckP50ms, ReloadP50ms (reloads) and BareCheckP50ms (endpoint)
	// are the medians of the samples' figures of the same name.
	CheckP50ms     float64 `json:"pier_check_p50_ms,omitempty"`
	ReloadP50ms    float64 `json:"pier_reload_p50_ms,omitempty"`
	BareCheckP50ms float64 `json:"bare_check_p50_ms,omitempty"`
	// PierCPUPerChangeMs (endpoint) is pier's CPU time over the series,
	// the `haproxy -c` processes it waited for included (utime, stime,
	// cutime, cstime), divided by the samples: each change's own work
	// and pier's background work over its 0.3 s of settling.
	PierCPUPerChangeMs float64 `json:"pier_cpu_per_change_ms,omitempty"`
	// PierCPUPerScrapeMs (endpoint) is pier's CPU per scrape of /metrics
	// (uncompressed) during the series, left out of PierCPUPerChangeMs.
	PierCPUPerScrapeMs float64 `json:"pier_cpu_per_scrape_ms,omitempty"`
	Reloads            float64 `json:"reloads"`
	Runtime            float64 `json:"runtime_updates"`
	// WorkersBefore and WorkersAfter are the HAProxy worker pids below
	// the state folder before the first and after the last sample: a
	// reload replaces a shard's worker, so equal lists mean no reload
	// happened, as HAProxy itself sees it.
	WorkersBefore []int   `json:"haproxy_workers_before,omitempty"`
	WorkersAfter  []int   `json:"haproxy_workers_after,omitempty"`
	DurationSec   float64 `json:"duration_s"`
	// Landed is how many samples the landing process served (new
	// Ingress); FoldReloads the reloads pier counted from the series'
	// first change until every landed load balancer was folded into its
	// shard: the deferred reloads that replace one reload per Ingress.
	Landed      int     `json:"landed,omitempty"`
	FoldReloads float64 `json:"fold_reloads,omitempty"`
}

// scaleRun is one `pier run` start with Ingresses present and the
// series measured on it.
type scaleRun struct {
	Ingresses  int     `json:"ingresses"` // present before the changes (the group's included)
	Processes  int     `json:"haproxy_processes_flag"`
	ServingSec float64 `json:"serving_s"` // start → all of them serving
	// IngressRead is GET /ingresses/NS/NAME of pier's API at rest, one
	// Ingress at a time: what a dashboard or pier get pays per object.
	IngressReadP50ms float64       `json:"ingress_read_p50_ms"`
	IngressReadP99ms float64       `json:"ingress_read_p99_ms"`
	LoadStart        float64       `json:"load_avg_start"`
	LoadEnd          float64       `json:"load_avg_end"`
	Series           []scaleSeries `json:"series"`
	// Traffic is the data plane with these Ingresses present
	// (scaletraffic_test.go).
	Traffic []scaleTraffic `json:"traffic,omitempty"`
}

const (
	scaleProcesses = 4 // shards, pier run's default
	groupName      = "shared"
	groupNS        = "grp"
	groupMembers   = 5
	flipNS         = "flip"
	flipHost       = "flip.bench.example"
	freshService   = "fresh"
)

// scaleSizes is PIER_BENCH_SCALE_SIZES (comma-separated Ingress
// counts), by default 100, 1,000 and 3,000; 100 when quick.
func scaleSizes(t *testing.T) []int {
	s := os.Getenv("PIER_BENCH_SCALE_SIZES")
	if s == "" {
		if quick() {
			return []int{100}
		}
		return []int{100, 1000, 3000}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("PIER_BENCH_SCALE_SIZES: bad count %q", f)
		}
		out = append(out, n)
	}
	return out
}

// scaleCount is an environment variable's sample count, or def.
func scaleCount(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		t.Fatalf("%s: bad count %q", name, s)
	}
	return n
}

// TestScale measures, with `pier run` packing the load balancers into 4
// HAProxy processes (the default) and n Ingresses present, how long a
// change takes from the manifest write to traffic: a Service's only
// member replaced by another (and that no reload happened), a new
// Ingress, and a new Ingress joining a shared load balancer. One pier
// start per size.
func TestScale(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	// 100: a nearest-rank 99th percentile of fewer samples is their
	// largest (the target for endpoint changes is a p99).
	endpoints := scaleCount(t, "PIER_BENCH_SCALE_ENDPOINT_SAMPLES", 100)
	newIngresses := scaleCount(t, "PIER_BENCH_SCALE_NEW_SAMPLES", 20)
	joins := scaleCount(t, "PIER_BENCH_SCALE_JOIN_SAMPLES", 20)
	endpointMax := scaleCount(t, "PIER_BENCH_SCALE_ENDPOINT_MAX", 3000)  // endpoint series only up to this size
	trafficRounds := scaleCount(t, "PIER_BENCH_SCALE_TRAFFIC_ROUNDS", 3) // 0: no traffic measurement
	if quick() {
		endpoints, newIngresses, joins, trafficRounds = 5, 3, 3, min(trafficRounds, 1)
	}
	var runs []scaleRun
	for _, n := range scaleSizes(t) {
		r := scaleAt(t, n, endpointsAt(n, endpointMax, endpoints), newIngresses, joins, trafficRounds)
		runs = append(runs, r)
		writeJSON(t, out, "scale.json", runs) // after each size: a later failure keeps the earlier ones
	}
	for _, r := range runs {
		for _, s := range r.Series {
			if s.Kind == kindEndpoint && (s.Reloads != 0 || !slices.Equal(s.WorkersBefore, s.WorkersAfter)) {
				t.Errorf("%d Ingresses: endpoint changes reloaded HAProxy: %v reloads counted, workers %v before, %v after",
					r.Ingresses, s.Reloads, s.WorkersBefore, s.WorkersAfter)
			}
		}
	}
}

func endpointsAt(n, max, samples int) int {
	if n > max {
		return 0
	}
	return samples
}

// scaleFixture is what one size's pier run serves.
type scaleFixture struct {
	dir       string // the manifests folder
	flipPort  int    // both flip members listen on this port, at 127.0.0.1 and 127.0.0.2
	freshPort int    // the backend of every new Ingress
	appPort   int    // the backend of the Ingresses present
	present   int
	p         *harness.Pier
	state     string
	client    *http.Client
	flipVIP   string
	groupVIP  string
	// scrapeCPU is pier's CPU spent answering the bench's own scrapes of
	// /metrics (scrape), scrapes their number: not part of any change.
	scrapeCPU time.Duration
	scrapes   int
}

func scaleAt(t *testing.T, n, endpoints, newIngresses, joins, trafficRounds int) scaleRun {
	f := &scaleFixture{dir: harness.ShortTempDir(t), state: harness.ShortTempDir(t),
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	f.appPort = harness.StartEcho(t, "app", "app-pod")
	f.freshPort = harness.StartEcho(t, freshService, "fresh-pod")
	f.flipPort = startFlipMembers(t)

	objs := shardIngresses(n, f.appPort)
	objs = append(objs, groupObjects(f.appPort, f.freshPort)...)
	objs = append(objs, flipObjects(f.flipPort)...)
	harness.WriteFile(t, filepath.Join(f.dir, "00-present.json"), manifestList(t, objs...))
	harness.WriteFile(t, filepath.Join(f.dir, "10-flip-slice.json"), manifestList(t, flipSlice(f.flipPort, 0)))
	f.present = n + groupMembers + 1

	r := scaleRun{Ingresses: f.present, Processes: scaleProcesses, LoadStart: loadAvg()}
	start := time.Now()
	f.p = harness.StartPier(t, harness.Options{Manifests: f.dir, State: f.state,
		ExtraArgs: []string{"--haproxy-processes", strconv.Itoa(scaleProcesses), "--log-level", scaleLogLevel()}})
	defer f.p.Stop()
	waitAllServe(t, f.p, n)
	f.flipVIP = f.p.Addresses(flipNS, "flip")[0]
	f.groupVIP = f.p.Addresses(groupNS, "member-0")[0]
	harness.WaitFor(t, time.Minute, "the flip and group Ingresses to serve", func() bool {
		return f.servedBy(f.flipVIP, flipHost, "flip-a") && f.servedBy(f.groupVIP, groupHost("member-0"), "app-pod")
	})
	r.ServingSec = time.Since(start).Seconds()
	t.Logf("%d Ingresses present: all serving in %.1f s (load %.1f)", f.present, r.ServingSec, loadAvg())
	time.Sleep(2 * time.Second) // let the status passes of the start settle
	// Load balancers that landed during the start (their shard was
	// already running) are loaded by deferred fold-in reloads, at most
	// 10 s later: part of the start, not of the first series.
	harness.WaitFor(t, time.Minute, "the landed load balancers of the start to be folded in", func() bool {
		landed := f.p.Metric("pier_haproxy_landings_total", `result="landed"`)
		return landed == f.folded()+f.p.Metric("pier_haproxy_landings_total", `result="removed"`)
	})

	r.IngressReadP50ms, r.IngressReadP99ms = f.ingressReads(t, n, 100)
	t.Logf("%d Ingresses present: GET /ingresses/NS/NAME at rest p50 %.2f ms, p99 %.2f ms", f.present, r.IngressReadP50ms, r.IngressReadP99ms)

	if trafficRounds > 0 {
		r.Traffic = f.trafficSeries(t, n, trafficRounds)
	}

	if endpoints > 0 {
		r.Series = append(r.Series, f.endpointSeries(t, endpoints))
	}
	if newIngresses > 0 {
		r.Series = append(r.Series, f.newIngressSeries(t, newIngresses))
	}
	if joins > 0 {
		r.Series = append(r.Series, f.groupJoinSeries(t, joins))
	}
	r.LoadEnd = loadAvg()
	if b, err := os.ReadFile(f.p.LogPath); err == nil {
		_ = os.WriteFile(filepath.Join(outDir(t), fmt.Sprintf("scale-%d.log", n)), b, 0o644)
	}
	return r
}

// ingressReads times reads of one Ingress each from pier's API, spread
// over the n present, and returns their median and p99 in ms.
func (f *scaleFixture) ingressReads(t *testing.T, n, reads int) (p50, p99 float64) {
	var took []float64
	for i := range reads {
		k := i * n / reads
		start := time.Now()
		ing, err := f.p.Ingress(fmt.Sprintf("team-%02d", k%50), fmt.Sprintf("app-%05d", k))
		took = append(took, ms(time.Since(start)))
		if err != nil || len(ing.LoadBalancers) != 1 {
			t.Fatalf("GET Ingress %d: %v (load balancers %v)", k, err, ing)
		}
	}
	sort.Float64s(took)
	return took[len(took)/2], took[(len(took)*99+99)/100-1]
}

// ---- fixtures

func groupHost(name string) string { return name + ".group.bench.example" }

// groupObjects is a shared load balancer of groupMembers Ingresses to
// Service app, and Service fresh in the same namespace, which the
// Ingresses joining it route to.
func groupObjects(appPort, freshPort int) []runtime.Object {
	var objs []runtime.Object
	for _, s := range []struct {
		name string
		port int
	}{{"app", appPort}, {freshService, freshPort}} {
		svc, es := Backend(groupNS, s.name, int32(s.port), "127.0.0.1")
		objs = append(objs, svc, es)
	}
	for i := 0; i < groupMembers; i++ {
		objs = append(objs, groupIngress(fmt.Sprintf("member-%d", i), "app", i))
	}
	return objs
}

func groupIngress(name, service string, age int) runtime.Object {
	ing := Ingress(groupNS, name, age, Rule(groupHost(name), Prefix("/", service)))
	ing.Annotations = map[string]string{annotation.LoadBalancer: groupName}
	return ing
}

// flipObjects is Service flip and its Ingress; the Service's
// EndpointSlice is a file of its own (flipSlice), rewritten by every
// endpoint sample.
func flipObjects(port int) []runtime.Object {
	svc, _ := Backend(flipNS, "flip", int32(port))
	return []runtime.Object{svc, Ingress(flipNS, "flip", 0, Rule(flipHost, Prefix("/", "flip")))}
}

// flipMembers are the two members the endpoint samples alternate
// between: pod names and addresses (the same port).
var flipMembers = [2]struct{ pod, addr string }{{"flip-a", "127.0.0.1"}, {"flip-b", "127.0.0.2"}}

func flipSlice(port, member int) runtime.Object {
	_, es := Backend(flipNS, "flip", int32(port), flipMembers[member].addr)
	es.Endpoints[0].TargetRef.Name = flipMembers[member].pod
	return es
}

// startFlipMembers starts the two flip echo backends on one port, at
// 127.0.0.1 and 127.0.0.2, each answering with its own pod name.
func startFlipMembers(t *testing.T) int {
	t.Helper()
	for attempt := 0; attempt < 20; attempt++ {
		a, err := net.Listen("tcp", flipMembers[0].addr+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", net.JoinHostPort(flipMembers[1].addr, strconv.Itoa(port)))
		if err != nil {
			a.Close() // the port is taken at the second address: try another
			continue
		}
		for i, l := range []net.Listener{a, b} {
			serveEcho(t, l, flipMembers[i].pod)
		}
		return port
	}
	t.Fatal("no port free at both 127.0.0.1 and 127.0.0.2")
	return 0
}

func serveEcho(t *testing.T, l net.Listener, pod string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := echo.Config{Namespace: flipNS, Service: "flip", Pod: pod}
		_ = echo.Serve(ctx, l, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// ---- measuring

// servedBy reports whether host at addr answers 200 from pod.
func (f *scaleFixture) servedBy(addr, host, pod string) bool {
	code, reply, _, err := harness.Get(f.client, addr, f.p.HTTPPort, host, "/")
	return err == nil && code == 200 && reply.Pod == pod
}

// change puts content in place at path (written aside, then renamed) and
// returns the time of the rename, with the log's size and pier's
// counters just before it.
type changeStart struct {
	at              time.Time
	logOffset       int64
	reloads, update float64
}

func (f *scaleFixture) change(t *testing.T, path, content string) changeStart {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	m := f.scrape(t)
	c := changeStart{logOffset: fileSize(f.p.LogPath), reloads: m.sum("pier_haproxy_reloads_total", `result="ok"`),
		update: m.sum("pier_haproxy_runtime_updates_total", `result="ok"`)}
	c.at = time.Now()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return c
}

func (f *scaleFixture) reloads(t *testing.T) float64 {
	return f.scrape(t).sum("pier_haproxy_reloads_total", `result="ok"`)
}

// scrape reads pier's /metrics once, uncompressed, and adds the CPU pier
// spent on it to f.scrapeCPU. With request metrics for every Ingress a
// scrape is tens of thousands of series (about 160 ms of pier's CPU at
// 1,000 Ingresses): the bench's own cost, which would otherwise be
// counted as the changes'. It runs when pier is idle (before a change,
// after one settled), so the difference is the scrape's.
func (f *scaleFixture) scrape(t *testing.T) metricsText {
	t.Helper()
	before := processCPU(t, f.p.Pid())
	req, _ := http.NewRequest(http.MethodGet, "http://"+f.p.API+"/metrics", nil)
	req.Header.Set("Accept-Encoding", "identity") // else Go's transport asks for gzip
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	f.scrapeCPU += processCPU(t, f.p.Pid()) - before
	f.scrapes++
	return metricsText(body)
}

// metricsText is a scrape in Prometheus's text format.
type metricsText string

// sum adds the samples of the metric name whose line contains every
// filter.
func (m metricsText) sum(name string, filters ...string) float64 {
	return harness.SumMetric(string(m), name, filters...)
}

// finish waits for pier to log that it applied the change (applied are
// the messages that say so), fills the sample's log-derived times and counters, and
// lets pier settle so that the next change is not merged with this one.
func (f *scaleFixture) finish(t *testing.T, c changeStart, s *scaleSample, applied ...string) {
	t.Helper()
	var m logMarks
	harness.WaitFor(t, 30*time.Second, "pier to log "+strings.Join(applied, " or "), func() bool {
		m = logTimes(f.p.LogPath, c.logOffset, applied...)
		return !m.applied.IsZero()
	})
	since := func(at time.Time) float64 {
		if at.IsZero() {
			return 0
		}
		return ms(at.Sub(c.at))
	}
	s.LoadedMs, s.StoredMs, s.AppliedMs = since(m.loaded), since(m.stored), since(m.applied)
	if took := tookPattern.FindStringSubmatch(m.appliedLine); took != nil {
		check, _ := time.ParseDuration(took[1])
		reload, _ := time.ParseDuration(took[2])
		s.CheckMs, s.ReloadMs = ms(check), ms(reload)
	}
	// Beyond the debounce (100 ms) and a status pass: nothing of this
	// change is left to run when the next one is written.
	time.Sleep(300 * time.Millisecond)
	m2 := f.scrape(t)
	s.Reloads = m2.sum("pier_haproxy_reloads_total", `result="ok"`) - c.reloads
	s.RuntimeUpdates = m2.sum("pier_haproxy_runtime_updates_total", `result="ok"`) - c.update
}

// poll calls served every millisecond until it holds, and returns the
// time from c's rename and the number of calls.
func poll(t *testing.T, c changeStart, what string, served func() bool) (float64, int) {
	t.Helper()
	for polls := 1; ; polls++ {
		if served() {
			return ms(time.Since(c.at)), polls
		}
		if time.Since(c.at) > 60*time.Second {
			t.Fatalf("%s: not served within 60 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// endpointSeries replaces the flip Service's only member by the other
// one, samples times, alternating, and times each from the EndpointSlice
// write to the first response from the new member.
func (f *scaleFixture) endpointSeries(t *testing.T, samples int) scaleSeries {
	s := scaleSeries{Kind: kindEndpoint, WorkersBefore: haproxyWorkers(f.state)}
	began := time.Now()
	path := filepath.Join(f.dir, "10-flip-slice.json")
	cpuBefore, scrapeBefore, scrapesBefore := processCPU(t, f.p.Pid()), f.scrapeCPU, f.scrapes
	cur := 0
	for i := 1; i <= samples; i++ {
		if !f.servedBy(f.flipVIP, flipHost, flipMembers[cur].pod) {
			t.Fatalf("endpoint sample %d: %s is not served by %s before the change", i, flipHost, flipMembers[cur].pod)
		}
		next := 1 - cur
		c := f.change(t, path, manifestList(t, flipSlice(f.flipPort, next)))
		smp := scaleSample{N: i}
		smp.EndToEndMs, smp.Polls = poll(t, c, "endpoint change", func() bool {
			return f.servedBy(f.flipVIP, flipHost, flipMembers[next].pod)
		})
		// A reload instead of a runtime update is recorded, and fails the
		// test at the end, rather than waited for in vain.
		f.finish(t, c, &smp, "members updated without reload", "haproxy reloaded")
		smp.BareCheckMs = f.bareCheck(t, flipNS+"/flip")
		cur = next
		s.Samples = append(s.Samples, smp)
	}
	scraped := f.scrapeCPU - scrapeBefore
	s.PierCPUPerChangeMs = ms(processCPU(t, f.p.Pid())-cpuBefore-scraped) / float64(samples)
	s.PierCPUPerScrapeMs = ms(scraped) / float64(f.scrapes-scrapesBefore)
	s.WorkersAfter = haproxyWorkers(f.state)
	s.DurationSec = time.Since(began).Seconds()
	s.summarise()
	t.Logf("%d Ingresses, endpoint change → new member serving: p50 %.1f ms, p99 %.1f ms (p50 marks: manifests read %.1f ms, stored %.1f ms, runtime update logged %.1f ms; bare haproxy -c of the fragment %.1f ms; pier's CPU per change %.1f ms, per /metrics scrape %.0f ms, left out); %v reloads, %v runtime updates, workers %v → %v",
		f.present, s.P50ms, s.P99ms, s.LoadedP50ms, s.StoredP50ms, s.AppliedP50ms, s.BareCheckP50ms, s.PierCPUPerChangeMs, s.PierCPUPerScrapeMs, s.Reloads, s.Runtime, s.WorkersBefore, s.WorkersAfter)
	return s
}

// processCPU is the CPU time of process pid and of the children it has
// waited for (utime, stime, cutime, cstime of /proc/PID/stat).
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	ticks, err := statTicks(pid, statUtime, statStime, statCutime, statCstime)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(ticks) * 10 * time.Millisecond // USER_HZ is 100
}

// bareCheck times `haproxy -c` of what pier checks before a runtime
// update of load balancer lb (namespace/name): the global file, shard
// 0's process file and lb's fragment.
func (f *scaleFixture) bareCheck(t *testing.T, lb string) float64 {
	t.Helper()
	b, _ := os.ReadFile(f.p.LogPath)
	m := regexp.MustCompile(`msg="load balancer stored" lb=` + regexp.QuoteMeta(lb) + ` uuid=(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no uuid of %s in pier's log", lb)
	}
	root := filepath.Join(f.state, "haproxy")
	args := []string{"-c", "-q", "-f", filepath.Join(root, "global.conf"),
		"-f", filepath.Join(root, "shard-0", "process.conf"), "-f", filepath.Join(root, string(m[1]), "haproxy.conf")}
	start := time.Now()
	if out, err := exec.Command("haproxy", args...).CombinedOutput(); err != nil {
		t.Fatalf("haproxy %v: %v\n%s", args, err, out)
	}
	return ms(time.Since(start))
}

// newIngressSeries adds Ingresses with a load balancer of their own, one
// file each, and times each from the write to its first 200 from Service
// fresh through its address.
func (f *scaleFixture) newIngressSeries(t *testing.T, samples int) scaleSeries {
	s := scaleSeries{Kind: kindNewIngress}
	began := time.Now()
	reloadsBefore, foldedBefore := f.reloads(t), f.folded()
	for i := 1; i <= samples; i++ {
		ns, name := "fresh", fmt.Sprintf("new-%03d", i)
		host := name + ".fresh.bench.example"
		svc, es := Backend(ns, name, int32(f.freshPort), "127.0.0.1")
		c := f.change(t, filepath.Join(f.dir, "20-"+name+".json"),
			manifestList(t, svc, es, Ingress(ns, name, i, Rule(host, Prefix("/", name)))))
		smp := scaleSample{N: i}
		addr := ""
		smp.EndToEndMs, smp.Polls = poll(t, c, "new Ingress "+name, func() bool {
			if addr == "" {
				if addr = storedVIP(f.p.LogPath, c.logOffset, ns+"/"+name); addr == "" {
					return false
				}
				smp.AddressMs = ms(time.Since(c.at))
			}
			return f.servedBy(addr, host, "fresh-pod")
		})
		smp.ReloadsBeforeServed = f.reloads(t) - c.reloads
		// Its own line: a fold-in reload of another shard may be logged
		// ("haproxy reloaded", by the process) before the landing is.
		lb := " lb=" + ns + "/" + name + " "
		harness.WaitFor(t, 30*time.Second, "pier to log that "+name+" landed or reloaded", func() bool {
			return logHas(f.p.LogPath, c.logOffset, `msg="load balancer landed without reload"`, lb) ||
				logHas(f.p.LogPath, c.logOffset, `msg="haproxy reloaded"`, lb)
		})
		smp.Landed = logHas(f.p.LogPath, c.logOffset, `msg="load balancer landed without reload"`, lb)
		if smp.Landed {
			f.finish(t, c, &smp, "load balancer landed without reload")
		} else {
			f.finish(t, c, &smp, "haproxy reloaded")
		}
		if smp.Landed {
			s.Landed++
		} else {
			t.Logf("new Ingress %s did not land: %s", name, landingLines(f.p.LogPath, c.logOffset))
		}
		s.Samples = append(s.Samples, smp)
	}
	s.DurationSec = time.Since(began).Seconds()
	// The landed ones are loaded by their shards' deferred reloads (1 s
	// after the last landing): wait for them, so that the reloads they
	// cost are counted here, not in the next series.
	harness.WaitFor(t, 30*time.Second, "landed load balancers folded into their shards", func() bool {
		return f.folded()-foldedBefore >= float64(s.Landed)
	})
	s.FoldReloads = f.reloads(t) - reloadsBefore
	s.summarise()
	t.Logf("%d Ingresses, new Ingress → first 200: p50 %.1f ms, p99 %.1f ms (p50 marks: manifests read %.1f ms, stored %.1f ms, landed or reload logged %.1f ms; shard check %.0f ms, reload %.0f ms); %d of %d samples landed without a reload, %v reloads counted within samples, %v reloads in all including the deferred fold-ins",
		f.present, s.P50ms, s.P99ms, s.LoadedP50ms, s.StoredP50ms, s.AppliedP50ms, s.CheckP50ms, s.ReloadP50ms, s.Landed, len(s.Samples), s.Reloads, s.FoldReloads)
	return s
}

// folded is pier's count of landed load balancers loaded by their shard.
func (f *scaleFixture) folded() float64 {
	return f.p.Metric("pier_haproxy_landings_total", `result="folded"`)
}

// groupJoinSeries adds Ingresses to the shared load balancer, one file
// each, and times each from the write to its host's first 200 from
// Service fresh through the group's address (404 before).
func (f *scaleFixture) groupJoinSeries(t *testing.T, samples int) scaleSeries {
	s := scaleSeries{Kind: kindGroupJoin}
	began := time.Now()
	for i := 1; i <= samples; i++ {
		name := fmt.Sprintf("join-%03d", i)
		host := groupHost(name)
		if code, _, _, err := harness.Get(f.client, f.groupVIP, f.p.HTTPPort, host, "/"); err != nil || code != 404 {
			t.Fatalf("group join %d: %s answers %d (%v) before the change, want 404", i, host, code, err)
		}
		c := f.change(t, filepath.Join(f.dir, "30-"+name+".json"), manifestList(t, groupIngress(name, freshService, 100+i)))
		smp := scaleSample{N: i}
		smp.EndToEndMs, smp.Polls = poll(t, c, "group join "+name, func() bool {
			return f.servedBy(f.groupVIP, host, "fresh-pod")
		})
		// The first join brings Service fresh, a new pool: a reload. The
		// next ones only add routes to it: map entries, no reload.
		f.finish(t, c, &smp, "routes updated without reload", "haproxy reloaded")
		s.Samples = append(s.Samples, smp)
	}
	s.DurationSec = time.Since(began).Seconds()
	s.summarise()
	t.Logf("%d Ingresses, new Ingress joining a shared group → first 200: p50 %.1f ms, p99 %.1f ms (p50 marks: manifests read %.1f ms, stored %.1f ms, applied logged %.1f ms; shard check %.0f ms, reload %.0f ms); %v reloads in %d samples",
		f.present, s.P50ms, s.P99ms, s.LoadedP50ms, s.StoredP50ms, s.AppliedP50ms, s.CheckP50ms, s.ReloadP50ms, s.Reloads, len(s.Samples))
	return s
}

func (s *scaleSeries) summarise() {
	var e, l, st, a, c, r, b []float64
	for _, smp := range s.Samples {
		e, l, st, a = append(e, smp.EndToEndMs), append(l, smp.LoadedMs), append(st, smp.StoredMs), append(a, smp.AppliedMs)
		c, r, b = append(c, smp.CheckMs), append(r, smp.ReloadMs), append(b, smp.BareCheckMs)
		s.Reloads += smp.Reloads
		s.Runtime += smp.RuntimeUpdates
	}
	s.P50ms, s.P99ms = nearestRank(e, 50), nearestRank(e, 99)
	s.MinMs, s.MaxMs = nearestRank(e, 0), nearestRank(e, 100)
	s.LoadedP50ms, s.StoredP50ms, s.AppliedP50ms = nearestRank(l, 50), nearestRank(st, 50), nearestRank(a, 50)
	s.CheckP50ms, s.ReloadP50ms, s.BareCheckP50ms = nearestRank(c, 50), nearestRank(r, 50), nearestRank(b, 50)
}

// nearestRank is the smallest value with at least p% of xs at or below
// it (p 0: the smallest).
func nearestRank(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(0, min(rank, len(s))-1)]
}

// haproxyWorkers lists the pids of the HAProxy workers below state.
func haproxyWorkers(state string) []int {
	var out []int
	for _, m := range processesBelow(state) {
		if m.Role == "haproxy-worker" {
			out = append(out, m.PID)
		}
	}
	sort.Ints(out)
	return out
}

// storedVIP is the VIP pier's log gives load balancer lb (namespace/name)
// in a "load balancer stored" line after offset, or "".
func storedVIP(path string, offset int64, lb string) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	m := regexp.MustCompile(`msg="load balancer stored" lb=` + regexp.QuoteMeta(lb) + ` uuid=\S+ vip=(\S+)`).FindSubmatch(b[offset:])
	if m == nil {
		return ""
	}
	return string(m[1])
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

var logTime = regexp.MustCompile(`^time=(\S+) `)

// logMarks are the times of the lines of pier's log that mark one
// change's way: the manifests read, the first load balancer stored, and
// the change applied (appliedLine is that line).
type logMarks struct {
	loaded, stored, applied time.Time
	appliedLine             string
}

// logTimes reads pier's log from offset and returns the time of the first
// "manifests changed" line, of the first "load balancer stored" after it
// and of the first line after that whose message is one of applied.
func logTimes(path string, offset int64, applied ...string) logMarks {
	var m logMarks
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return m
	}
	for _, line := range bytes.Split(b[offset:], []byte("\n")) {
		tm := logTime.FindSubmatch(line)
		if tm == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, string(tm[1]))
		if err != nil {
			continue
		}
		switch {
		case m.loaded.IsZero():
			if bytes.Contains(line, []byte(`msg="manifests changed"`)) {
				m.loaded = at
			}
		case m.stored.IsZero() && bytes.Contains(line, []byte(`msg="load balancer stored"`)):
			m.stored = at
		default:
			for _, a := range applied {
				if bytes.Contains(line, []byte(`msg="`+a+`"`)) {
					m.applied, m.appliedLine = at, string(line)
					return m
				}
			}
		}
	}
	return m
}

// scaleLogLevel is pier's log level: info, or PIER_BENCH_SCALE_LOG (debug
// shows more of where a change's time goes, and costs some of it).
func scaleLogLevel() string {
	if l := os.Getenv("PIER_BENCH_SCALE_LOG"); l != "" {
		return l
	}
	return "info"
}

// landingLines are pier's log lines since offset that say why a new load
// balancer did not land, or what held it up.
func landingLines(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	var out []string
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		for _, m := range []string{"does not land", "landing", "haproxy reloaded", "landed"} {
			if strings.Contains(line, m) {
				out = append(out, line)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// logHas reports whether one of pier's log lines since offset holds
// every one of parts.
func logHas(path string, offset int64, parts ...string) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return false
	}
	for _, line := range strings.Split(string(b[offset:]), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			return true
		}
	}
	return false
}
