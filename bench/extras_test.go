package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// extrasVariant is one HAProxy configuration of TestExtrasCost: pier's
// config at 120 routes (PIER_BENCH_EXTRAS_ROUTES) as render writes it, or
// changed by edit.
type extrasVariant struct {
	name string
	edit func(t *testing.T, pier, ref []byte) []byte
	// host is the requests' Host: RoutingLastHost (pier's last route)
	// unless set.
	host string
}

// requestHost is the Host v is loaded with.
func (v extrasVariant) requestHost() string {
	if v.host != "" {
		return v.host
	}
	return RoutingLastHost
}

// firstRouteName is pier's config again, loaded on its first route
// (RoutingFirstHost) while pier is loaded on its last: what the route's
// place costs, with the control's resolution (the target: first
// and last route within 5 %).
const firstRouteName = "pier again, its first route"

// extrasVariants are what TestExtrasCost measures: pier's full config,
// pier without each extra (the extras of TestRouting), pier without all
// of them, and the hand-written reference, plain and with the two
// X-Forwarded-* headers every ingress controller sets.
func extrasVariants() []extrasVariant {
	vs := []extrasVariant{{name: "pier", edit: func(_ *testing.T, pier, _ []byte) []byte { return pier }},
		// The control: the same config in another process. What it
		// "saves" is the method's own bias and noise.
		{name: controlName, edit: func(_ *testing.T, pier, _ []byte) []byte { return pier }},
		{name: firstRouteName, edit: func(_ *testing.T, pier, _ []byte) []byte { return pier }, host: RoutingFirstHost}}
	for _, e := range extras {
		vs = append(vs, extrasVariant{name: "without " + e.name, edit: func(t *testing.T, pier, _ []byte) []byte {
			return withoutLine(t, pier, e.line)
		}})
	}
	vs = append(vs,
		extrasVariant{name: "without the drain rule", edit: func(t *testing.T, pier, _ []byte) []byte {
			return withoutLine(t, pier, "set-header Connection close")
		}},
		extrasVariant{name: withoutAll, edit: func(t *testing.T, pier, _ []byte) []byte {
			for _, e := range extras {
				pier = withoutLine(t, pier, e.line)
			}
			return withoutLine(t, pier, "set-header Connection close")
		}},
		extrasVariant{name: refExtras, edit: func(_ *testing.T, _, ref []byte) []byte { return ref }},
		extrasVariant{name: refForwarded, edit: func(t *testing.T, _, ref []byte) []byte { return withForwarded(t, ref) }},
	)
	for _, f := range otherForms {
		vs = append(vs, extrasVariant{name: "pier with " + f.name, edit: func(t *testing.T, pier, _ []byte) []byte {
			return replaceLine(t, pier, f.line, f.with)
		}})
	}
	for _, r := range amplified {
		vs = append(vs, extrasVariant{name: amplifiedName(r.name), edit: func(t *testing.T, pier, _ []byte) []byte {
			return withCopies(t, pier, r.line, copies)
		}})
	}
	if only := os.Getenv("PIER_BENCH_EXTRAS_ONLY"); only != "" {
		re := regexp.MustCompile(only)
		vs = slices.DeleteFunc(vs, func(v extrasVariant) bool {
			return v.name != "pier" && v.name != controlName && !re.MatchString(v.name)
		})
	}
	return vs
}

// otherForms are other ways to write an extra with the same verdicts:
// pier's config with the line that contains line replaced by with.
var otherForms = []struct{ name, line, with string }{
	{"the path look-alikes as one regular expression", "path -m sub // /./ /../",
		`http-request deny deny_status 400 if { path -m reg -i '(?://|/[.][.]?(?:/|$)|%(?:2[def]|3[0-9]|[46][1-9a-f]|[57][0-9a]|5f|7e))' }`},
	{"Host required spelled out, two Host lookups (before)", "req.hdr(host) -m found } || { req.ver",
		`http-request deny deny_status 400 if !{ req.hdr(host) -m found } !{ req.ver 1.0 } || !{ req.hdr(host) -m found } !{ url_beg / }`},
	{"Server: pier by set-header (before)", "Server pier unless",
		`http-after-response set-header Server pier unless { res.hdr_cnt(server) gt 0 }`},
}

// replaceLine replaces the one line of conf that contains s by with,
// indented as it was.
func replaceLine(t *testing.T, conf []byte, s, with string) []byte {
	t.Helper()
	lines := strings.Split(string(conf), "\n")
	n := 0
	for i, l := range lines {
		if strings.Contains(l, s) {
			n++
			lines[i] = l[:len(l)-len(strings.TrimLeft(l, " "))] + with
		}
	}
	if n != 1 {
		t.Fatalf("%d lines contain %q, want 1", n, s)
	}
	return []byte(strings.Join(lines, "\n"))
}

// copies is how many more times an amplified variant repeats a rule: a
// rule's own cost is a few hundred nanoseconds, under the noise of one
// run, and copies times it is not.
const copies = 10

// amplified are the extras that are rules (not options), so that a
// config can hold them more than once: pier's config with copies more of
// one of them gives that rule's cost per evaluation. A repeated
// conditional set-header (Server, the trailing dot) evaluates its
// condition again but sets nothing, so its figure is the condition's.
var amplified = []struct{ name, line string }{
	{"header guard", "req.hdrs -m reg"},
	{"X-Forwarded-Proto", "set-header X-Forwarded-Proto"},
	{"Host required", "req.hdr(host) -m found } || { req.ver"},
	{"path look-alikes", "path -m sub // /./ /../"},
	{"trailing Host dot (condition)", "regsub([.]$,)"},
	{"Server: pier (condition)", "Server pier unless"},
	{"drain rule", "set-header Connection close"},
	{"backend connection bound", "be_conn gt"},
}

func amplifiedName(name string) string { return fmt.Sprintf("pier + %d × %s", copies, name) }

// withCopies repeats every line of conf that contains s n more times.
func withCopies(t *testing.T, conf []byte, s string, n int) []byte {
	t.Helper()
	var out []string
	found := false
	for _, l := range strings.Split(string(conf), "\n") {
		out = append(out, l)
		if strings.Contains(l, s) {
			found = true
			for range n {
				out = append(out, l)
			}
		}
	}
	if !found {
		t.Fatalf("no line contains %q", s)
	}
	return []byte(strings.Join(out, "\n"))
}

// controlName is pier's own config in a second process.
const controlName = "pier again (control: the same config)"

// refForwarded is the hand-written reference plus X-Forwarded-For and
// X-Forwarded-Proto: what an operator writes when the applications behind
// read them, as they do behind any ingress controller.
const refForwarded = "hand-written reference with X-Forwarded-*"

// withForwarded adds option forwardfor and X-Forwarded-Proto to the
// reference's frontend.
func withForwarded(t *testing.T, ref []byte) []byte {
	t.Helper()
	const anchor = "    http-request set-var(txn.host)"
	s := string(ref)
	if !strings.Contains(s, anchor) {
		t.Fatalf("reference: no line %q", anchor)
	}
	return []byte(strings.Replace(s, anchor,
		"    option forwardfor\n    http-request set-header X-Forwarded-Proto http\n"+anchor, 1))
}

// extrasRun is one fixed-count run of one variant.
type extrasRun struct {
	Round     int     `json:"round"`
	Headers   string  `json:"headers"` // minimal or browser
	Config    string  `json:"config"`
	Pair      string  `json:"pair"` // the config measured at the same time
	Requests  int     `json:"requests"`
	ProxyNs   int64   `json:"proxy_cpu_ns"` // HAProxy master + worker on-CPU time, /proc/PID/task/*/schedstat
	NsPerReq  float64 `json:"proxy_ns_per_req"`
	Seconds   float64 `json:"seconds"`
	LoadAvg   float64 `json:"load_avg"`
	ProxyCPU  int     `json:"proxy_cpu"`
	ClientCPU []int   `json:"client_cpus"`
}

// TestExtrasCost prices each of pier's per-request extras precisely:
// HAProxy runs one thread pinned to one CPU (nbthread 1,
// cpu-map), the load generator and the echo backend (this test process,
// its threads pinned) to the other, so they do not take turns on the
// proxy's CPU. Each run sends a fixed number of keep-alive requests and
// reads the proxy's on-CPU time in nanoseconds (schedstat, not the 10 ms
// ticks of /proc/PID/stat); the rounds interleave every variant, so a
// neighbour's load falls on all of them alike. Two header sets: the
// minimal request of a load generator and a desktop browser's.
func TestExtrasCost(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	rounds, d, conns := 9, time.Second, 16
	if c, err := strconv.Atoi(os.Getenv("PIER_BENCH_EXTRAS_CONNS")); err == nil && c > 0 {
		conns = c
	}
	if quick() {
		rounds = 1
	}
	proxyCPU, clientCPUs := pinSelf(t)
	root := harness.ShortTempDir(t)
	target := startOKBackend(t, root, clientCPUs[0])
	decoy := harness.FreePort(t)

	pdir, rdir := filepath.Join(root, "p"), filepath.Join(root, "r")
	for _, d := range []string{pdir, rdir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// Placeholder listeners, each variant binds its own port. (Not
	// 127.0.0.1:1: render parks its empty server slots there.)
	const pierPort, refPort = "127.0.0.1:3", "127.0.0.1:2"
	routes := 120
	if n, err := strconv.Atoi(os.Getenv("PIER_BENCH_EXTRAS_ROUTES")); err == nil && n >= 2 {
		routes = n // e.g. 2000, for the first route's pair at that size
	}
	pier, lb, err := RoutingConfig(routes, int32(target), int32(decoy), 3, pdir)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := RoutingReference(lb, refPort, "127.0.0.1:"+strconv.Itoa(target), "127.0.0.1:"+strconv.Itoa(decoy), rdir)
	if err != nil {
		t.Fatal(err)
	}
	variants := append(extrasVariants(), accessLogVariants(t, lb, pdir, filepath.Join(root, "access.sock"))...)
	insts := map[string]proxyInstance{}
	configs := map[string]string{}
	for i, v := range variants {
		dir := filepath.Join(root, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		port := harness.FreePort(t)
		conf := string(v.edit(t, pier, ref))
		conf = strings.Replace(conf, "bind "+pierPort+" ", "bind 127.0.0.1:"+strconv.Itoa(port)+" ", 1)
		conf = strings.Replace(conf, "bind "+refPort+"\n", "bind 127.0.0.1:"+strconv.Itoa(port)+"\n", 1)
		if !strings.Contains(conf, "bind 127.0.0.1:"+strconv.Itoa(port)) {
			t.Fatalf("%s: no bind line to move to port %d", v.name, port)
		}
		conf = pinnedGlobal(t, conf, proxyCPU)
		configs[v.name] = conf
		insts[v.name] = startConfig(t, dir, []byte(conf), port)
	}
	writeJSON(t, out, "extras-configs.json", configs)
	headerSets := map[string][]string{"minimal": nil, "browser": browserHeaders}
	for _, v := range variants { // warm-up, and every variant routes to the target
		in := insts[v.name]
		if _, err := fixedLoad(in.port, v.requestHost(), DataPlanePath, browserHeaders, conns, 1000); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		if _, err := wrkPinned(in.port, v.requestHost(), DataPlanePath, browserHeaders, conns, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	loadStart := loadAvg()
	began := time.Now()
	var runs []extrasRun
	for round := 1; round <= rounds; round++ {
		for _, hs := range []string{"minimal", "browser"} {
			order := slices.Clone(variants[1:]) // variants[0] is pier, in every pair
			// Rotate and alternate the order, so that no variant always
			// comes at the same time of a round.
			k := round % len(order)
			order = append(order[k:], order[:k]...)
			if round%2 == 0 {
				slices.Reverse(order)
			}
			for _, v := range order {
				p, x := measurePair(t, insts["pier"], insts[v.name], v.requestHost(), headerSets[hs], conns, d)
				p.Round, p.Headers, p.Config, p.Pair = round, hs, "pier", v.name
				x.Round, x.Headers, x.Config, x.Pair = round, hs, v.name, "pier"
				runs = append(runs, p, x)
				t.Logf("round %d %-7s %-55s %6.2f µs/req (pier %6.2f) %6.0f req/s  load %.2f", round, hs, v.name,
					x.NsPerReq/1000, p.NsPerReq/1000, float64(x.Requests)/x.Seconds, x.LoadAvg)
			}
		}
	}
	loadEnd := loadAvg()
	md := extrasMarkdown(runs, variants, routes, rounds, d, conns, loadStart, loadEnd)
	t.Logf("\n%s", md)
	writeJSON(t, out, "extras.json", map[string]any{"runs": runs, "duration_s": time.Since(began).Seconds(),
		"load_start": loadStart, "load_end": loadEnd, "run_s": d.Seconds(), "connections": conns, "routes": routes,
		"wrk":     fmt.Sprintf("wrk -t1 -c%d (keep-alive), pinned beside the backend", conns),
		"headers": headerSets, "path": DataPlanePath, "host": RoutingLastHost})
	if err := os.WriteFile(filepath.Join(out, "extras.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// accessLogVariants are pier's config with access logs, sending to a
// socket at sock that a goroutine drains as the agent would (the agent's
// own cost per line is accesslog's BenchmarkHandle): every request (on,
// or the request metrics), and sample=100 done by HAProxy
// (--request-metrics=false).
func accessLogVariants(t *testing.T, lb *model.LoadBalancer, dir, sock string) []extrasVariant {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 65536)
		for {
			if _, err := conn.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { conn.Close() })
	variant := func(name string, o render.AccessLogOptions) extrasVariant {
		o.Socket = sock
		return extrasVariant{name: name, edit: func(t *testing.T, _, _ []byte) []byte {
			conf, err := render.Config(lb, render.Options{Dir: dir, AccessLog: o})
			if err != nil {
				t.Fatal(err)
			}
			return conf
		}}
	}
	return []extrasVariant{
		variant("with the access log, every request (on, or the metrics)", render.AccessLogOptions{Default: model.AccessLogOn, Metrics: true}),
		variant("with the access log, sample=100 by HAProxy (metrics off)", render.AccessLogOptions{Default: model.AccessLog{Sample: 100}}),
	}
}

// extraNamed is the name of the extra whose line contains s.
func extraNamed(s string) string {
	for _, e := range extras {
		if strings.Contains(e.line, s) {
			return e.name
		}
	}
	panic("no extra with " + s)
}

// measurePair loads pier and x at the same time for d, each with its own
// wrk, and returns each one's run. Both proxies share one CPU and meet
// the same neighbours in the same second, so what the machine's other
// work adds falls on both alike: the difference is the configs'.
func measurePair(t *testing.T, pier, x proxyInstance, xHost string, headers []string, conns int, d time.Duration) (extrasRun, extrasRun) {
	t.Helper()
	ins := []proxyInstance{pier, x}
	hosts := []string{RoutingLastHost, xHost}
	before := []int64{cpuNanos(pier.master()), cpuNanos(x.master())}
	start := time.Now()
	counts, errs := make([]int, 2), make([]error, 2)
	var wg sync.WaitGroup
	for i, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i], errs[i] = wrkPinned(in.port, hosts[i], DataPlanePath, headers, conns, d)
		}()
	}
	wg.Wait()
	runs := make([]extrasRun, 2)
	for i, in := range ins {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		ns := cpuNanos(in.master()) - before[i]
		runs[i] = extrasRun{Requests: counts[i], ProxyNs: ns, NsPerReq: float64(ns) / float64(counts[i]),
			Seconds: time.Since(start).Seconds(), LoadAvg: loadAvg()}
	}
	return runs[0], runs[1]
}

// extrasMarkdown is the table: per variant and header set, its median
// CPU per request with the rounds' min–max, and the median difference
// to pier measured at the same time; then each amplified rule's cost.
func extrasMarkdown(runs []extrasRun, variants []extrasVariant, routes, rounds int, d time.Duration, conns int, loadStart, loadEnd float64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pier's config at %d routes, loaded on its last route unless said. ", routes)
	fmt.Fprintf(&b, "%d rounds; in each, every config for %s at the same time as pier's, both on one CPU, one thread each, "+
		"each with its own `wrk -t1 -c%d` (keep-alive) on the other CPU beside the backend; load average %.2f at the start, %.2f at the end.\n\n",
		rounds, d, conns, loadStart, loadEnd)
	b.WriteString("| config | minimal headers: CPU/req (min–max) | saved vs pier (min–max) | browser headers: CPU/req (min–max) | saved vs pier (min–max) |\n")
	b.WriteString("|---|---:|---:|---:|---:|\n")
	// pairs gives, for the config's runs with hs, its µs/req and pier's
	// in the same pair.
	pairs := func(hs, config string) (xs, pier []float64) {
		for i := 0; i+1 < len(runs); i += 2 {
			p, x := runs[i], runs[i+1]
			if x.Headers == hs && x.Config == config {
				xs, pier = append(xs, x.NsPerReq/1000), append(pier, p.NsPerReq/1000)
			}
		}
		return xs, pier
	}
	span := func(xs []float64, format string) string {
		if len(xs) == 0 {
			return "–"
		}
		return fmt.Sprintf(format+" ("+format+" – "+format+")", medianOf(xs), slices.Min(xs), slices.Max(xs))
	}
	cell := func(hs, config string) (string, string) {
		if config == "pier" {
			var all []float64
			for _, r := range runs {
				if r.Headers == hs && r.Config == "pier" {
					all = append(all, r.NsPerReq/1000)
				}
			}
			return span(all, "%.2f µs"), "–"
		}
		xs, pier := pairs(hs, config)
		var saved []float64
		for i := range xs {
			saved = append(saved, pier[i]-xs[i])
		}
		return span(xs, "%.2f µs"), span(saved, "%+.2f µs")
	}
	for _, v := range variants {
		if strings.HasPrefix(v.name, "pier + ") || strings.HasPrefix(v.name, "pier with ") {
			continue
		}
		m1, s1 := cell("minimal", v.name)
		b1, s2 := cell("browser", v.name)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v.name, m1, s1, b1, s2)
	}
	b.WriteString("\npier ÷ config, CPU per request in the same pair: median (min–max).\n\n")
	b.WriteString("| config | minimal headers | browser headers |\n|---|---:|---:|\n")
	ratio := func(hs, config string) string {
		xs, pier := pairs(hs, config)
		var rs []float64
		for i := range xs {
			if xs[i] > 0 {
				rs = append(rs, pier[i]/xs[i])
			}
		}
		return span(rs, "%.2f×")
	}
	for _, c := range []string{refExtras, refForwarded, withoutAll, "without " + extraNamed("retry-on"), controlName, firstRouteName} {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c, ratio("minimal", c), ratio("browser", c))
	}
	b.WriteString("\nOther forms of an extra, same verdicts: CPU per request, and what they save against pier's form measured at the same time.\n\n")
	b.WriteString("| form | minimal headers: CPU/req | saved vs pier (min–max) | browser headers: CPU/req | saved vs pier (min–max) |\n|---|---:|---:|---:|---:|\n")
	for _, f := range otherForms {
		m1, s1 := cell("minimal", "pier with "+f.name)
		b1, s2 := cell("browser", "pier with "+f.name)
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", f.name, m1, s1, b1, s2)
	}
	fmt.Fprintf(&b, "\nOne rule's cost per request: pier with %d more copies of it, its difference to pier in the same pair ÷ %d.\n\n", copies, copies)
	b.WriteString("| rule | minimal headers (min–max) | browser headers (min–max) |\n|---|---:|---:|\n")
	perCopy := func(hs, name string) string {
		xs, pier := pairs(hs, amplifiedName(name))
		var per []float64
		for i := range xs {
			per = append(per, (xs[i]-pier[i])*1000/copies)
		}
		return span(per, "%+.0f ns")
	}
	for _, r := range amplified {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.name, perCopy("minimal", r.name), perCopy("browser", r.name))
	}
	return b.String()
}

// pinnedGlobal gives the config's first global section one thread pinned
// to cpu.
func pinnedGlobal(t *testing.T, conf string, cpu int) string {
	t.Helper()
	if !strings.Contains(conf, "\nglobal\n") {
		t.Fatal("config without a global section")
	}
	return strings.Replace(conf, "\nglobal\n", fmt.Sprintf("\nglobal\n    nbthread 1\n    cpu-map 1/1 %d\n", cpu), 1)
}

// pinSelf moves every thread of this process (the load generator and the
// echo backend; threads made later inherit it) off the proxy's CPU, and
// restores the mask at the end of the test. The proxy takes the first
// CPU this process may use.
func pinSelf(t *testing.T) (int, []int) {
	t.Helper()
	var orig unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	var cpus []int
	for c := range 1024 {
		if orig.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		t.Skipf("TestExtrasCost needs 2 CPUs, this process may use %v", cpus)
	}
	var client unix.CPUSet
	for _, c := range cpus[1:] {
		client.Set(c)
	}
	setAll := func(set *unix.CPUSet) error {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return err
		}
		for _, e := range tasks {
			tid, _ := strconv.Atoi(e.Name())
			if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("thread %d: %w", tid, err)
			}
		}
		return nil
	}
	if err := setAll(&client); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := setAll(&orig); err != nil {
			t.Errorf("restore CPU affinity: %v", err)
		}
	})
	return cpus[0], cpus[1:]
}

// cpuNanos is the on-CPU time of pid's threads and its children's (the
// HAProxy master and worker), in nanoseconds: the first field of
// /proc/PID/task/TID/schedstat.
func cpuNanos(pid int) int64 {
	var total int64
	for _, p := range append([]int{pid}, children(pid)...) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, e := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", p, e.Name()))
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				total += n
			}
		}
	}
	return total
}

// fixedLoad sends n keep-alive GET requests for path with host and
// headers over conns connections to 127.0.0.1:port, and checks that each
// is answered 200 with "ok" (the target, not a decoy). It returns the
// number of requests sent.
func fixedLoad(port int, host, path string, headers []string, conns, n int) (int, error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n"
	for _, h := range headers {
		req += h + "\r\n"
	}
	req += "\r\n"
	var sent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := loadConn(port, req, &sent, int64(n)); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	return n, nil
}

// loadConn sends req on one connection, one at a time, while the shared
// count is under n.
func loadConn(port int, req string, sent *atomic.Int64, n int64) error {
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for sent.Add(1) <= n {
		if _, err := io.WriteString(c, req); err != nil {
			return err
		}
		if err := readOK(r); err != nil {
			return err
		}
	}
	return nil
}

// readOK reads one response and fails unless it is a 200 whose body is
// "ok".
func readOK(r *bufio.Reader) error {
	status, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(status, "HTTP/1.1 200 ") {
		return fmt.Errorf("response %q", strings.TrimSpace(status))
	}
	length := -1
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "content-length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if length < 0 {
		return fmt.Errorf("response without Content-Length")
	}
	body := make([]byte, length)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if string(body) != "ok" {
		return fmt.Errorf("body %q, want ok from the target", body)
	}
	return nil
}

// startOKBackend is the backend of TestExtrasCost: a one-thread HAProxy
// on cpu that answers every request 200 "ok" itself, cheaper and steadier
// than a Go server beside the load generator.
func startOKBackend(t *testing.T, root string, cpu int) int {
	t.Helper()
	dir := filepath.Join(root, "backend")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	port := harness.FreePort(t)
	conf := fmt.Sprintf("global\n    maxconn 4096\n    nbthread 1\n    cpu-map 1/1 %d\n\n%s\nfrontend ok\n    bind 127.0.0.1:%d\n"+
		"    http-request return status 200 content-type text/plain string ok\n", cpu, referenceDefaults, port)
	startConfig(t, dir, []byte(conf), port)
	return port
}

// wrkPinned runs one wrk thread (on this process's CPUs: pinSelf) with
// conns keep-alive connections for d and returns the number of requests;
// any non-2xx answer or socket error is an error.
func wrkPinned(port int, host, path string, headers []string, conns int, d time.Duration) (int, error) {
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency", "-H", "Host: " + host}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, "http://127.0.0.1:"+strconv.Itoa(port)+path)
	out, err := exec.Command("wrk", args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk %v: %w\n%s", args, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return 0, fmt.Errorf("wrk %v: %w\n%s", args, err, out)
	}
	if r.Non2xx > 0 || r.SocketErrors > 0 || r.Requests == 0 {
		return 0, fmt.Errorf("wrk %v: %d requests, %d non-2xx, %d socket errors", args, r.Requests, r.Non2xx, r.SocketErrors)
	}
	return r.Requests, nil
}
