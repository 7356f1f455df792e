//go:build linux

package bench

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/netnsdo"
	"pier.dev/pier/test/ecmplab"
)

// TestMain makes the test binary an ECMP lab node when the lab starts it
// as one (ecmplab.StartNode), and runs the tests otherwise.
func TestMain(m *testing.M) {
	if os.Getenv(ecmplab.NodeEnv) != "" {
		os.Exit(ecmplab.NodeMain())
	}
	os.Exit(m.Run())
}

// The ECMP world of TestECMP, test/ecmp's lab with names of its own:
//
//	client <p>c 10.77.100.2 ─┐
//	pods   <p>p 10.77.101.11-13 ─ router <p>r (bird, multipath) ─ <p>n0..n2 10.77.<i+1>.2
//
// <p> is ecmpNSPrefix and this process's pid, so that two runs, or a run
// and test/ecmp, never share a namespace; lab.RemoveStale deletes what a
// killed run left.
const (
	ecmpNSPrefix = "ecmpb"
	ecmpClientIP = "10.77.100.2"
	ecmpVIP      = "10.77.200.1"
	ecmpNodes    = 3
	ecmpFlows    = 64 // wrk's connections: enough for the router's hash to spread
)

var ecmpEndpoints = []string{"10.77.101.11", "10.77.101.12", "10.77.101.13"}

func ecmpNodeAddr(i int) string   { return fmt.Sprintf("10.77.%d.2", i+1) }
func ecmpRouterAddr(i int) string { return fmt.Sprintf("10.77.%d.1", i+1) }

// ecmpWorld is the running lab.
type ecmpWorld struct {
	prefix string
	dir    string
	sock   string // bird's control socket
	nodes  []*ecmplab.Node
	flows  *flowCounter
}

func (w *ecmpWorld) ns(name string) string { return w.prefix + name }
func (w *ecmpWorld) nodeNS(i int) string   { return w.ns(fmt.Sprintf("n%d", i)) }

// ecmpRun is one wrk run of TestECMP.
type ecmpRun struct {
	Round int    `json:"round"`
	Path  string `json:"path"` // direct, ecmp-1, ecmp-2 or ecmp-3
	Mode  string `json:"mode"` // close (a new connection per request) or keep-alive
	wrkResult
	// Flows are the connections the endpoints accepted during the run,
	// by the node that forwarded them (the address it masqueraded them
	// to), or "client" for direct.
	Flows   map[string]int `json:"flows"`
	LoadAvg float64        `json:"load_avg"`
}

type ecmpResult struct {
	Wrk         string    `json:"wrk"`
	Direct      string    `json:"direct"`
	CPUs        int       `json:"cpus"`
	Rounds      int       `json:"rounds"`
	Runs        []ecmpRun `json:"runs"`
	StartedAt   time.Time `json:"started_at"`
	DurationSec float64   `json:"duration_s"`
	LoadStart   string    `json:"loadavg_start"`
}

const ecmpDirect = "the client to one endpoint (10.77.101.11:8080) through the router only: " +
	"the same client, router and endpoints, no VIP route, no node, so no node's conntrack, DNAT or masquerade"

// TestECMP measures the native provider's ECMP path against direct, in
// one world: three nodes running the agent's native driver and BGP mover
// behind a bird router with multipath. In each round every path is
// measured in turn (the order rotates from round to round, so that no
// path always comes first after a switch): direct, then the VIP with 1, 2
// and 3 nodes in the ECMP set (the others drained: their routes
// withdrawn, as a draining agent does), each with wrk and ecmpFlows
// connections, Connection: close (new connections: connect, one request,
// the answer, close) and keep-alive (requests over established flows).
// The endpoints count the connections each node forwarded, so the run
// checks the router spread them. Writes ecmp.json and ecmp.md into
// PIER_BENCH_OUT. PIER_BENCH_ECMP_ROUNDS (5) and PIER_BENCH_ECMP_SECONDS
// (5) set its size.
func TestECMP(t *testing.T) {
	out := outDir(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: the lab's namespaces")
	}
	requireBinaries(t, "ip", "bird", "birdc", "nft", "wrk")
	rounds, duration, warmup := envInt("PIER_BENCH_ECMP_ROUNDS", 5), time.Duration(envInt("PIER_BENCH_ECMP_SECONDS", 5))*time.Second, time.Second
	if quick() {
		rounds, duration = 1, 2*time.Second
	}
	res := ecmpResult{Wrk: fmt.Sprintf("wrk -t2 -c%d -d%ds --latency", ecmpFlows, int(duration.Seconds())),
		Direct: ecmpDirect, CPUs: runtime.NumCPU(), Rounds: rounds, StartedAt: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadStart = strings.TrimSpace(string(b))
	}
	w := newECMPWorld(t)

	urls := map[string]string{"direct": "http://" + ecmpEndpoints[0] + ":8080/"}
	paths := []string{"direct"}
	for k := 1; k <= ecmpNodes; k++ {
		p := fmt.Sprintf("ecmp-%d", k)
		paths = append(paths, p)
		urls[p] = "http://" + ecmpVIP + "/"
	}
	// setPath puts the first k nodes in the ECMP set (none to change for
	// direct) and waits for the router's route to have exactly them.
	setPath := func(p string) {
		k, err := strconv.Atoi(strings.TrimPrefix(p, "ecmp-"))
		if err != nil {
			return
		}
		w.setECMP(t, k)
	}
	for _, p := range paths {
		setPath(p)
		for _, closeConn := range []bool{true, false} {
			w.runWrk(t, urls[p], closeConn, warmup)
		}
	}
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		for i := range paths {
			p := paths[(i+round-1)%len(paths)]
			setPath(p)
			for _, mode := range []string{"close", "keep-alive"} {
				w.flows.take()
				r := w.runWrk(t, urls[p], mode == "close", duration)
				run := ecmpRun{Round: round, Path: p, Mode: mode, wrkResult: r, Flows: w.flows.take(), LoadAvg: loadAvg()}
				t.Logf("round %d %-7s %-10s %8.0f req/s  p50 %6.2f ms  p99 %6.2f ms  non-2xx %d  socket errors %d  flows %v  load %.2f",
					round, p, mode, r.RPS, r.P50ms, r.P99ms, r.Non2xx, r.SocketErrors, run.Flows, run.LoadAvg)
				checkECMPRun(t, run)
				res.Runs = append(res.Runs, run)
			}
		}
	}
	res.DurationSec = time.Since(began).Seconds()
	writeJSON(t, out, "ecmp.json", res)
	md := ecmpMarkdown(res, paths)
	t.Log("\n" + md)
	if err := os.WriteFile(filepath.Join(out, "ecmp.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkECMPRun fails the test when a run's answers were not all 200s,
// when more than 1% of its connections failed, or when its flows did not
// go where the path sends them: direct from the client; through the VIP
// only via the nodes in the set, each of them with some (keep-alive: 64
// flows) or a fair share within 20% (close: thousands).
func checkECMPRun(t *testing.T, r ecmpRun) {
	t.Helper()
	if r.Non2xx > 0 || r.SocketErrors*100 > r.Requests {
		t.Errorf("round %d %s %s: %d non-2xx, %d socket errors in %d requests", r.Round, r.Path, r.Mode, r.Non2xx, r.SocketErrors, r.Requests)
	}
	want := []string{"client"}
	if k, err := strconv.Atoi(strings.TrimPrefix(r.Path, "ecmp-")); err == nil {
		want = nil
		for i := range k {
			want = append(want, fmt.Sprintf("n%d", i))
		}
	}
	total := 0
	for from, n := range r.Flows {
		total += n
		if !slices.Contains(want, from) {
			t.Errorf("round %d %s %s: %d flows from %s, want only %v", r.Round, r.Path, r.Mode, n, from, want)
		}
	}
	for _, from := range want {
		n := r.Flows[from]
		fair := float64(total) / float64(len(want))
		if n == 0 || (r.Mode == "close" && (float64(n) < fair*0.8 || float64(n) > fair*1.2)) {
			t.Errorf("round %d %s %s: %s took %d of %d flows, want about %.0f: not spread", r.Round, r.Path, r.Mode, from, n, total, fair)
		}
	}
}

// runWrk runs wrk from the client namespace against url for d.
func (w *ecmpWorld) runWrk(t *testing.T, url string, closeConn bool, d time.Duration) wrkResult {
	t.Helper()
	args := []string{"netns", "exec", w.ns("c"), "wrk", "-t2", "-c" + strconv.Itoa(ecmpFlows), "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency"}
	if closeConn {
		args = append(args, "-H", "Connection: close")
	}
	args = append(args, url)
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	return r
}

// newECMPWorld builds the namespaces, bird, the endpoints and the three
// nodes, all in the ECMP set, and removes everything at the end of the
// test, failed or not.
func newECMPWorld(t *testing.T) *ecmpWorld {
	t.Helper()
	lab.RemoveStale(ecmpNSPrefix)
	w := &ecmpWorld{prefix: ecmpNSPrefix + strconv.Itoa(os.Getpid()) + "-", dir: t.TempDir(), flows: &flowCounter{names: map[string]string{ecmpClientIP: "client"}}}
	all := []string{w.ns("r"), w.ns("c"), w.ns("p")}
	for i := range ecmpNodes {
		all = append(all, w.nodeNS(i))
		w.flows.names[ecmpNodeAddr(i)] = fmt.Sprintf("n%d", i)
	}
	// Registered first, so it runs last: after the nodes and bird are
	// gone, whatever still runs in a namespace (a wrk cut short) is
	// killed and the namespaces deleted.
	t.Cleanup(func() {
		for _, ns := range all {
			lab.KillIn(ns)
			_ = exec.Command("ip", "netns", "delete", ns).Run()
		}
	})
	router := w.ns("r")
	ecmpIP(t, "netns", "add", router)
	ecmpIP(t, "-n", router, "link", "set", "lo", "up")
	// Layer-4 hashing (policy 1), as an ECMP router in front of load
	// balancers must: with the default every flow of one client would go
	// to one node.
	ecmpIP(t, "netns", "exec", router, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv4.fib_multipath_hash_policy=1")
	w.link(t, w.ns("c"), "rc", ecmpClientIP, "10.77.100.1")
	w.link(t, w.ns("p"), "rp", ecmpEndpoints[0], "10.77.101.1", ecmpEndpoints[1:]...)
	var peers []ecmplab.BirdPeer
	for i := range ecmpNodes {
		w.link(t, w.nodeNS(i), fmt.Sprintf("r%d", i), ecmpNodeAddr(i), ecmpRouterAddr(i))
		ecmpIP(t, "netns", "exec", w.nodeNS(i), "sysctl", "-qw", "net.ipv4.ip_forward=1")
		peers = append(peers, ecmplab.BirdPeer{Name: fmt.Sprintf("n%d", i), Local: ecmpRouterAddr(i), Neighbor: ecmpNodeAddr(i)})
	}
	w.startBird(t, ecmplab.BirdConfig("10.77.100.1", peers, true, false))
	w.startEndpoints(t)
	lb := model.LoadBalancer{UUID: "0e0c0f00-0000-4000-8000-0000000000b1", Name: "bench/ecmp", Provider: model.ProviderNative,
		VIP: ecmpVIP, Listeners: []model.Listener{{Name: "tcp-80", Protocol: model.ProtocolTCP, Port: 80, DefaultPoolID: "p"}},
		Placement: model.Placement{Active: "n0", Standby: "n1", ECMP: []string{"n0", "n1", "n2"}}}
	pool := model.Pool{ID: "p", Name: "bench_ecmp_80"}
	for _, ep := range ecmpEndpoints {
		pool.Members = append(pool.Members, model.Member{Address: ep, Port: 8080, Weight: 1})
	}
	lb.Pools = []model.Pool{pool}
	for i := range ecmpNodes {
		name := fmt.Sprintf("n%d", i)
		n, err := ecmplab.StartNode(w.nodeNS(i), ecmplab.NodeConfig{Name: name, Self: ecmpNodeAddr(i), Router: ecmpRouterAddr(i),
			StateDir: filepath.Join(w.dir, name), LB: lb, Log: filepath.Join(w.dir, name+".log")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Kill)
		w.nodes = append(w.nodes, n)
	}
	w.waitPaths(t, ecmpNodes)
	return w
}

func ecmpIP(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// link connects namespace ns (eth0, addr and extra) to the router (dev,
// raddr), its default route via the router.
func (w *ecmpWorld) link(t *testing.T, ns, dev, addr, raddr string, extra ...string) {
	t.Helper()
	router := w.ns("r")
	ecmpIP(t, "netns", "add", ns)
	ecmpIP(t, "-n", ns, "link", "set", "lo", "up")
	ecmpIP(t, "-n", router, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns)
	ecmpIP(t, "-n", router, "addr", "add", raddr+"/24", "dev", dev)
	ecmpIP(t, "-n", router, "link", "set", dev, "up")
	for _, a := range append([]string{addr}, extra...) {
		ecmpIP(t, "-n", ns, "addr", "add", a+"/24", "dev", "eth0")
	}
	ecmpIP(t, "-n", ns, "link", "set", "eth0", "up")
	ecmpIP(t, "-n", ns, "route", "add", "default", "via", raddr)
}

// startBird runs bird on conf in the router namespace until the end of
// the test and returns once it answers.
func (w *ecmpWorld) startBird(t *testing.T, conf string) {
	t.Helper()
	path := filepath.Join(w.dir, "bird.conf")
	w.sock = filepath.Join(w.dir, "bird.ctl")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	bird := exec.Command("ip", "netns", "exec", w.ns("r"), "bird", "-f", "-c", path, "-s", w.sock, "-P", filepath.Join(w.dir, "bird.pid"))
	bird.Stderr = os.Stderr
	if err := bird.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bird.Process.Kill(); _ = bird.Wait() })
	ecmpWait(t, 5*time.Second, "bird to answer", func() bool {
		out, _ := exec.Command("birdc", "-s", w.sock, "show", "status").CombinedOutput()
		return strings.Contains(string(out), "Daemon is up")
	})
}

// startEndpoints serves HTTP on every endpoint in the pods namespace:
// "ok" to any request, the connections counted by peer (w.flows).
func (w *ecmpWorld) startEndpoints(t *testing.T) {
	t.Helper()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) }),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				w.flows.add(c.RemoteAddr())
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	for _, ep := range ecmpEndpoints {
		var ln net.Listener
		if err := netnsdo.Do(w.ns("p"), func() (err error) {
			ln, err = net.Listen("tcp", ep+":8080")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		go func() { _ = srv.Serve(ln) }()
	}
	t.Cleanup(func() { _ = srv.Close() })
}

var ecmpNexthopRE = regexp.MustCompile(`nexthop via (\S+)|^\S+ via (\S+)`)

// paths are the next hops of the router's kernel route to the VIP.
func (w *ecmpWorld) paths() []string {
	out, err := exec.Command("ip", "-n", w.ns("r"), "route", "show", ecmpVIP).CombinedOutput()
	if err != nil {
		return nil
	}
	var hops []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := ecmpNexthopRE.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
			hops = append(hops, m[1]+m[2])
		}
	}
	sort.Strings(hops)
	return hops
}

// waitPaths waits until the router's route to the VIP goes to nodes
// 0..k-1 and no other.
func (w *ecmpWorld) waitPaths(t *testing.T, k int) {
	t.Helper()
	var want []string
	for i := range k {
		want = append(want, ecmpNodeAddr(i))
	}
	ecmpWait(t, 15*time.Second, fmt.Sprintf("route to %s via %v", ecmpVIP, want), func() bool { return slices.Equal(w.paths(), want) })
}

// setECMP leaves nodes 0..k-1 in the ECMP set and drains the others (the
// agent's drain: the route withdrawn, the node's table kept).
func (w *ecmpWorld) setECMP(t *testing.T, k int) {
	t.Helper()
	for i, n := range w.nodes {
		cmd := "undrain"
		if i >= k {
			cmd = "drain"
		}
		if err := n.Do(cmd); err != nil {
			t.Fatal(err)
		}
	}
	w.waitPaths(t, k)
}

func ecmpWait(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for start := time.Now(); time.Since(start) < limit; time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("no %s after %s", what, limit)
}

// flowCounter counts the connections the endpoints accept, by the name
// of the peer's address (a node's, or the client's).
type flowCounter struct {
	names map[string]string // address -> name; set before the endpoints start
	mu    sync.Mutex
	n     map[string]int
}

func (f *flowCounter) add(a net.Addr) {
	host, _, _ := net.SplitHostPort(a.String())
	name := f.names[host]
	if name == "" {
		name = host
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	f.n[name]++
}

// take returns the counts since the last call and starts again.
func (f *flowCounter) take() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.n
	f.n = nil
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// ecmpMarkdown tabulates, for every path and mode, the median over the
// rounds with min–max, the ratio of the medians to direct's, p99, and
// each node's share of the flows over all rounds.
func ecmpMarkdown(res ecmpResult, paths []string) string {
	runs := func(path, mode string) []ecmpRun {
		var out []ecmpRun
		for _, r := range res.Runs {
			if r.Path == path && r.Mode == mode {
				out = append(out, r)
			}
		}
		return out
	}
	stats := func(rs []ecmpRun, f func(ecmpRun) float64) (med, lo, hi float64) {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		sort.Float64s(xs)
		if len(xs) == 0 {
			return 0, 0, 0
		}
		med = xs[len(xs)/2]
		if len(xs)%2 == 0 {
			med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
		}
		return med, xs[0], xs[len(xs)-1]
	}
	rps := func(r ecmpRun) float64 { return r.RPS }
	p99 := func(r ecmpRun) float64 { return r.P99ms }
	share := func(rs []ecmpRun) string {
		sum, total := map[string]int{}, 0
		for _, r := range rs {
			for from, n := range r.Flows {
				sum[from] += n
				total += n
			}
		}
		var names []string
		for from := range sum {
			names = append(names, from)
		}
		sort.Strings(names)
		var parts []string
		for _, from := range names {
			parts = append(parts, fmt.Sprintf("%s %.0f%%", from, 100*float64(sum[from])/float64(total)))
		}
		return fmt.Sprintf("%s (%d)", strings.Join(parts, " · "), total)
	}
	var b strings.Builder
	b.WriteString("# The native provider's ECMP path against direct\n\n")
	fmt.Fprintf(&b, "Started %s, %d rounds of `%s` per path and mode (Connection: close for new connections), "+
		"%d CPUs, load average at start %s.\n\n", res.StartedAt.Format(time.RFC3339), res.Rounds, res.Wrk, res.CPUs, res.LoadStart)
	fmt.Fprintf(&b, "Direct is %s. ecmp-k is the VIP with k nodes in the ECMP set (the others drained): "+
		"client, router (bird, multipath, layer-4 hash), one of the k nodes (conntrack, DNAT, masquerade), router, endpoint.\n\n", res.Direct)
	fmt.Fprintf(&b, "All the nodes, the router, wrk and the endpoints share the machine's %d CPUs: "+
		"more nodes add no capacity here, so 3 nodes cannot give 3×. The figures are the cost of the ECMP path against direct, "+
		"and that the router spreads the flows at load.\n\n", res.CPUs)
	b.WriteString("Medians over the rounds (min–max); req/s, higher is better; ratio: each round's run to that round's direct run, " +
		"median (min–max); p99 in ms, median; flows by the node that forwarded them over all rounds (total).\n\n")
	b.WriteString("| path | new connections/s | ratio | p99 | flows by node | keep-alive req/s | ratio | p99 | flows by node |\n")
	b.WriteString("|---|---:|---:|---:|---|---:|---:|---:|---|\n")
	// The ratio of each round's run to that round's direct run, the two
	// a few seconds apart: on a shared machine the load drifts between
	// rounds more than within one.
	ratios := func(path, mode string) []ecmpRun {
		direct := map[int]float64{}
		for _, r := range runs("direct", mode) {
			direct[r.Round] = r.RPS
		}
		var out []ecmpRun
		for _, r := range runs(path, mode) {
			if direct[r.Round] > 0 {
				out = append(out, ecmpRun{wrkResult: wrkResult{RPS: r.RPS / direct[r.Round]}})
			}
		}
		return out
	}
	for _, p := range paths {
		fmt.Fprintf(&b, "| %s", p)
		for _, mode := range []string{"close", "keep-alive"} {
			rs := runs(p, mode)
			med, lo, hi := stats(rs, rps)
			p99med, _, _ := stats(rs, p99)
			rmed, rlo, rhi := stats(ratios(p, mode), rps)
			fmt.Fprintf(&b, " | %.0f (%.0f–%.0f) | %.2f (%.2f–%.2f) | %.2f | %s", med, lo, hi, rmed, rlo, rhi, p99med, share(rs))
		}
		b.WriteString(" |\n")
	}
	return b.String()
}
