package bench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// routingRun is one wrk run of the routing measurement.
type routingRun struct {
	Round  int    `json:"round"`
	Routes int    `json:"routes"`
	Route  string `json:"route"`  // first or last
	Config string `json:"config"` // pier, reference, or pier without one extra
	wrkResult
	CPUms      float64 `json:"proxy_cpu_ms"` // HAProxy master + worker CPU during the run
	CPUPerReqU float64 `json:"proxy_cpu_us_per_req"`
	LoadAvg    float64 `json:"load_avg"`
}

// extras are pier's per-request rules, each removed from pier's config in
// one variant, to give each its cost. The header guard stays in pier;
// this only measures it.
var extras = []struct{ name, line string }{
	{"header guard (req.hdrs -m reg, control bytes)", "req.hdrs -m reg"},
	{"X-Forwarded-Proto", "set-header X-Forwarded-Proto"},
	{"X-Forwarded-For", "set-header X-Forwarded-For"},
	{"X-Request-ID (a UUID unless the client's is sane)", "set-header X-Request-ID"},
	{"header-name restriction", "option http-restrict-req-hdr-names"},
	{"L7 retries (retry-on … empty-response)", "retry-on conn-failure empty-response"},
	{"Server: pier (http-after-response)", "Server pier unless"},
	{"Host required (400 without Host)", "req.hdr(host) -m found } || { req.ver"},
	{"path look-alikes (400 for // /./ /../ %XX)", "path -m sub // /./ /../"},
	{"one trailing Host dot stripped", "regsub([.]$,)"},
	{"backend connection bound (be_conn, every backend)", "be_conn gt"},
}

// withoutAll is pier's config without any of the extras.
const (
	withoutAll = "without all extras"
	refExtras  = "hand-written reference"
)

// TestRouting compares pier's map routing with a hand-written map config
// at 120 and 2,000 routes, first and last route, keep-alive, interleaved
// rounds; then pier without each per-request extra at 120 routes.
func TestRouting(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "wrk")
	rounds, d, dExtra, warmup := 3, 5*time.Second, 4*time.Second, time.Second
	if quick() {
		rounds, d, dExtra = 1, time.Second, time.Second
	}
	target := harness.StartEcho(t, DataPlaneTarget, "target-pod")
	decoy := harness.FreePort(t) // nothing listens: a decoy route answers 503
	root := harness.ShortTempDir(t)
	insts := map[string]proxyInstance{} // "<config>/<routes>"
	start := func(key string, conf []byte, dir string, port int) {
		insts[key] = startConfig(t, dir, conf, port)
	}
	mkdir := func(name string) string {
		dir := filepath.Join(root, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	sizes := []int{120, 2000}
	// nginx (Debian's) is the third reference when installed: bench/run.sh
	// installs it.
	_, err := exec.LookPath("nginx")
	withNginx := err == nil
	if !withNginx {
		t.Log("nginx not found: routing measured against the hand-written HAProxy config only")
	}
	var pier120 []byte
	var pier120Port int
	for _, n := range sizes {
		pdir, rdir := mkdir(fmt.Sprintf("p%d", n)), mkdir(fmt.Sprintf("r%d", n))
		pport, rport := harness.FreePort(t), harness.FreePort(t)
		conf, lb, err := RoutingConfig(n, int32(target), int32(decoy), pport, pdir)
		if err != nil {
			t.Fatal(err)
		}
		ref, err := RoutingReference(lb, "127.0.0.1:"+strconv.Itoa(rport), "127.0.0.1:"+strconv.Itoa(target),
			"127.0.0.1:"+strconv.Itoa(decoy), rdir)
		if err != nil {
			t.Fatal(err)
		}
		start(fmt.Sprintf("pier/%d", n), conf, pdir, pport)
		start(fmt.Sprintf("reference/%d", n), ref, rdir, rport)
		configs := map[string]string{"pier": string(conf), "reference": string(ref)}
		if withNginx {
			ndir, nport := mkdir(fmt.Sprintf("n%d", n)), harness.FreePort(t)
			nconf, err := RoutingNginx(lb, "127.0.0.1:"+strconv.Itoa(nport), "127.0.0.1:"+strconv.Itoa(target),
				"127.0.0.1:"+strconv.Itoa(decoy), ndir)
			if err != nil {
				t.Fatal(err)
			}
			insts[fmt.Sprintf("nginx/%d", n)] = proxyInstance{port: nport, master: startNginx(t, ndir, nconf, nport)}
			configs["nginx"] = string(nconf)
		}
		writeJSON(t, out, fmt.Sprintf("routing-%d-configs.json", n), configs)
		if n == 120 {
			pier120, pier120Port = conf, pport
		}
	}
	for i, e := range extras {
		conf := withoutLine(t, pier120, e.line)
		dir := mkdir(fmt.Sprintf("x%d", i))
		// Same port number is impossible; the variant binds its own.
		port := harness.FreePort(t)
		conf = []byte(strings.ReplaceAll(string(conf), "127.0.0.1:"+strconv.Itoa(pier120Port), "127.0.0.1:"+strconv.Itoa(port)))
		start("without "+e.name+"/120", conf, dir, port)
	}

	all := pier120
	for _, e := range extras {
		all = withoutLine(t, all, e.line)
	}
	allPort := harness.FreePort(t)
	all = []byte(strings.ReplaceAll(string(all), "127.0.0.1:"+strconv.Itoa(pier120Port), "127.0.0.1:"+strconv.Itoa(allPort)))
	start(withoutAll+"/120", all, mkdir("xall"), allPort)
	insts["pier full/120"] = insts["pier/120"] // the baseline of the extras
	insts[refExtras+"/120"] = insts["reference/120"]
	hosts := map[string]string{"first": RoutingFirstHost, "last": RoutingLastHost}
	client := &http.Client{Timeout: 5 * time.Second}
	for key, in := range insts {
		for route, host := range hosts {
			// Decoys answer 503 (nothing listens), so "ok" is the target.
			if body, err := getBody(client, in.port, host, DataPlanePath); err != nil || body != "ok" {
				t.Fatalf("%s %s route: GET %s: %q %v, want ok from the target", key, route, DataPlanePath, body, err)
			}
		}
		want := 503 // HAProxy: no server up
		if strings.HasPrefix(key, "nginx/") {
			want = 502 // nginx: the upstream refused the connection
		}
		if code, _, _, err := harness.Get(client, "127.0.0.1", in.port, "r00001.bench.example", "/api/v1"); err != nil || code != want {
			t.Fatalf("%s: a decoy route answered %d %v, want %d", key, code, err, want)
		}
	}

	measure := func(round, n int, route, config string, dur time.Duration) routingRun {
		run := measureRun(t, insts[config+"/"+strconv.Itoa(n)], DataPlanePath, hosts[route], nil, dur)
		run.Round, run.Routes, run.Route, run.Config = round, n, route, config
		t.Logf("round %d %4d routes %-5s %-50s %8.0f req/s  %5.1f µs CPU/req  non-2xx %d  load %.2f",
			round, n, route, config, run.RPS, run.CPUPerReqU, run.Non2xx, run.LoadAvg)
		return run
	}
	for _, in := range insts {
		runWrk(t, "http://127.0.0.1:"+strconv.Itoa(in.port)+DataPlanePath, RoutingFirstHost, false, warmup)
	}
	var runs []routingRun
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		for _, n := range sizes {
			for _, route := range []string{"first", "last"} {
				// Alternate which config goes first, so neither always
				// follows the other.
				configs := []string{"pier", "reference"}
				if withNginx {
					configs = append(configs, "nginx")
				}
				if round%2 == 0 {
					slices.Reverse(configs)
				}
				for _, c := range configs {
					runs = append(runs, measure(round, n, route, c, d))
				}
			}
		}
		runs = append(runs, measure(round, 120, "last", "pier full", dExtra))
		for _, e := range extras {
			runs = append(runs, measure(round, 120, "last", "without "+e.name, dExtra))
		}
		runs = append(runs, measure(round, 120, "last", withoutAll, dExtra))
		runs = append(runs, measure(round, 120, "last", refExtras, dExtra))
	}
	writeJSON(t, out, "routing.json", map[string]any{"runs": runs, "duration_s": time.Since(began).Seconds(),
		"wrk": "wrk -t2 -c50 --latency (keep-alive)", "path": DataPlanePath})
	md := routingMarkdown(runs, sizes)
	t.Logf("\n%s", md)
	if err := os.WriteFile(filepath.Join(out, "routing.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// startNginx runs nginx with conf (listening on port) in dir, in the
// foreground of a child process, until the end of the test, and returns
// its master's pid.
func startNginx(t *testing.T, dir string, conf []byte, port int) func() int {
	t.Helper()
	cfg := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cfg, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("nginx", "-t", "-q", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", cfg).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t %s: %v\n%s", cfg, err, out)
	}
	cmd := exec.Command("nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"), "-c", cfg, "-g", "daemon off;")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // graceful: the workers finish and exit
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("nginx in %s did not stop within 20 s of SIGQUIT", dir)
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	harness.WaitFor(t, 10*time.Second, "nginx to listen on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return func() int { return cmd.Process.Pid }
}

// withoutLine drops the lines of conf that contain s: one, or one per
// backend for a backend's rule.
func withoutLine(t *testing.T, conf []byte, s string) []byte {
	t.Helper()
	var kept []string
	n := 0
	for _, l := range strings.Split(string(conf), "\n") {
		if strings.Contains(l, s) {
			n++
			continue
		}
		kept = append(kept, l)
	}
	if n == 0 {
		t.Fatalf("no line contains %q", s)
	}
	return []byte(strings.Join(kept, "\n"))
}

// cpuTicks is utime+stime of pid and its children (HAProxy's worker), in
// clock ticks.
func cpuTicks(pid int) int64 {
	var total int64
	for _, p := range append([]int{pid}, children(pid)...) {
		ticks, err := statTicks(p, statUtime, statStime)
		if err != nil {
			continue
		}
		total += ticks
	}
	return total
}

// Fields of /proc/PID/stat (proc(5), numbered from 1) that hold times in
// clock ticks (USER_HZ, 100): the process's own user and system time,
// and those of the children it has waited for.
const (
	statUtime  = 14
	statStime  = 15
	statCutime = 16
	statCstime = 17
)

// statTicks is the sum of fields of /proc/PID/stat, in clock ticks.
func statTicks(pid int, fields ...int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // field 3 onwards
	var total int64
	for _, n := range fields {
		v, err := strconv.ParseInt(f[n-3], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, n, err)
		}
		total += v
	}
	return total, nil
}

// routingMarkdown summarises the runs: medians over rounds, ratios
// computed per round (pier and its reference ran back to back) and then
// their median, with the smallest and largest in brackets.
func routingMarkdown(runs []routingRun, sizes []int) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	pick := func(n int, route, config string) []routingRun {
		var out []routingRun
		for _, r := range runs {
			if r.Routes == n && r.Route == route && r.Config == config {
				out = append(out, r)
			}
		}
		return out
	}
	med := func(rs []routingRun, f func(routingRun) float64) float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		return medianOf(xs)
	}
	ratio := func(a, b []routingRun, f func(routingRun) float64) (float64, float64, float64) {
		var xs []float64
		for i := range min(len(a), len(b)) {
			if f(b[i]) > 0 {
				xs = append(xs, f(a[i])/f(b[i]))
			}
		}
		if len(xs) == 0 {
			return 0, 0, 0
		}
		return medianOf(xs), slices.Min(xs), slices.Max(xs)
	}
	rps := func(r routingRun) float64 { return r.RPS }
	cpu := func(r routingRun) float64 { return r.CPUPerReqU }
	p("| routes | route | pier req/s | ref req/s | req/s ratio (min–max) | pier CPU/req | ref CPU/req | CPU ratio (min–max) | load |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, n := range sizes {
		for _, route := range []string{"first", "last"} {
			pr, rr := pick(n, route, "pier"), pick(n, route, "reference")
			r, rlo, rhi := ratio(pr, rr, rps)
			c, clo, chi := ratio(pr, rr, cpu)
			p("| %d | %s | %.0f | %.0f | **%.2f** (%.2f–%.2f) | %.1f µs | %.1f µs | **%.2f** (%.2f–%.2f) | %.1f |\n",
				n, route, med(pr, rps), med(rr, rps), r, rlo, rhi, med(pr, cpu), med(rr, cpu), c, clo, chi,
				med(pr, func(r routingRun) float64 { return r.LoadAvg }))
		}
	}
	if len(pick(sizes[0], "first", "nginx")) > 0 {
		p("\n| routes | route | pier req/s | nginx req/s | pier ÷ nginx req/s (min–max) | pier CPU/req | nginx CPU/req | pier ÷ nginx CPU (min–max) |\n")
		p("|---:|---|---:|---:|---:|---:|---:|---:|\n")
		for _, n := range sizes {
			for _, route := range []string{"first", "last"} {
				pr, nr := pick(n, route, "pier"), pick(n, route, "nginx")
				r, rlo, rhi := ratio(pr, nr, rps)
				c, clo, chi := ratio(pr, nr, cpu)
				p("| %d | %s | %.0f | %.0f | **%.2f** (%.2f–%.2f) | %.1f µs | %.1f µs | **%.2f** (%.2f–%.2f) |\n",
					n, route, med(pr, rps), med(nr, rps), r, rlo, rhi, med(pr, cpu), med(nr, cpu), c, clo, chi)
			}
		}
	}
	p("\n| routes | config | first req/s | last req/s | last ÷ first (min–max) | first CPU/req | last CPU/req |\n")
	p("|---:|---|---:|---:|---:|---:|---:|\n")
	for _, n := range sizes {
		for _, c := range []string{"pier", "reference", "nginx"} {
			f, l := pick(n, "first", c), pick(n, "last", c)
			if len(f) == 0 {
				continue
			}
			r, lo, hi := ratio(l, f, rps)
			p("| %d | %s | %.0f | %.0f | **%.2f** (%.2f–%.2f) | %.1f µs | %.1f µs |\n", n, c, med(f, rps), med(l, rps), r, lo, hi, med(f, cpu), med(l, cpu))
		}
	}
	p("\n| pier at 120 routes, last route | req/s | CPU/req | req/s ÷ full pier (min–max) | CPU/req saved |\n")
	p("|---|---:|---:|---:|---:|\n")
	full := pick(120, "last", "pier full")
	p("| full config | %.0f | %.1f µs | 1 | – |\n", med(full, rps), med(full, cpu))
	for _, e := range extras {
		v := pick(120, "last", "without "+e.name)
		r, lo, hi := ratio(v, full, rps)
		p("| without %s | %.0f | %.1f µs | %.3f (%.3f–%.3f) | %+.1f µs |\n", e.name, med(v, rps), med(v, cpu), r, lo, hi, med(full, cpu)-med(v, cpu))
	}
	for _, c := range []string{withoutAll, refExtras} {
		v := pick(120, "last", c)
		r, lo, hi := ratio(v, full, rps)
		p("| %s | %.0f | %.1f µs | %.3f (%.3f–%.3f) | %+.1f µs |\n", c, med(v, rps), med(v, cpu), r, lo, hi, med(full, cpu)-med(v, cpu))
	}
	return b.String()
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
