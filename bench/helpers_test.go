package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/process"
)

// outDir is where the measurements that need HAProxy write their raw
// results: $PIER_BENCH_OUT. Without it they skip, so `go test ./...` stays
// fast and quiet.
func outDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PIER_BENCH_OUT")
	if dir == "" {
		t.Skip("set PIER_BENCH_OUT (bench/run.sh does) to run the measurements")
	}
	return dir
}

// quick is PIER_BENCH_QUICK=1: fewer and shorter runs, to check that the
// measurements work, not to measure.
func quick() bool { return os.Getenv("PIER_BENCH_QUICK") == "1" }

func requireBinaries(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			t.Fatalf("%s not found: bench/run.sh installs it", n)
		}
	}
}

func writeJSON(t *testing.T, dir, name string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// linesStarting returns the trimmed lines of conf whose first word is word.
func linesStarting(conf []byte, word string) []string {
	var out []string
	for _, l := range strings.Split(string(conf), "\n") {
		l = strings.TrimSpace(l)
		if f := strings.Fields(l); len(f) > 0 && f[0] == word {
			out = append(out, l)
		}
	}
	return out
}

// withoutSection drops the section whose header line is header (its
// lines up to the next unindented line) from a HAProxy configuration.
func withoutSection(conf []byte, header string) []byte {
	var out []string
	skipping := false
	for _, l := range strings.Split(string(conf), "\n") {
		if l != "" && l[0] != ' ' && l[0] != '\t' {
			skipping = strings.TrimSpace(l) == header
		}
		if !skipping {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, "\n"))
}

// loadAvg is the first field of /proc/loadavg: how busy the machine was.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// startHAProxy runs cfg under pier's own driver (master-worker, master
// CLI, `haproxy -c` first), in dir, and stops it at the end of the test.
func startHAProxy(t *testing.T, dir, cfg string) *process.Instance {
	t.Helper()
	return startHAProxyBinary(t, "", dir, cfg)
}

// startConfig writes conf as dir/haproxy.conf and runs it
// (startHAProxy); port is the one conf binds.
func startConfig(t *testing.T, dir string, conf []byte, port int) proxyInstance {
	t.Helper()
	cfg := filepath.Join(dir, "haproxy.conf")
	if err := os.WriteFile(cfg, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	inst := startHAProxy(t, dir, cfg)
	return proxyInstance{port: port, master: inst.PID}
}

// wrkResult is what one wrk run reports.
type wrkResult struct {
	RPS          float64 `json:"rps"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	Requests     int     `json:"requests"`
	Non2xx       int     `json:"non_2xx_3xx"`
	SocketErrors int     `json:"socket_errors"`
}

// proxyInstance is one HAProxy (or nginx) process of a side-by-side
// measurement: the port it serves and its master's pid, whose CPU time
// (with its workers') is what a run costs.
type proxyInstance struct {
	port   int
	master func() int
}

// measureRun runs wrk (keep-alive) for d against in with host and
// headers, and returns the run with the proxy's CPU per request; any
// non-2xx answer or socket error fails the test.
func measureRun(t *testing.T, in proxyInstance, path, host string, headers []string, d time.Duration) routingRun {
	t.Helper()
	before := cpuTicks(in.master())
	r := runWrkHeaders(t, "http://127.0.0.1:"+strconv.Itoa(in.port)+path, host, headers, d)
	ms := float64(cpuTicks(in.master())-before) * 10 // USER_HZ is 100
	run := routingRun{wrkResult: r, CPUms: ms, LoadAvg: loadAvg()}
	if r.Requests > 0 {
		run.CPUPerReqU = ms * 1000 / float64(r.Requests)
	}
	if r.Non2xx > 0 || r.SocketErrors > 0 {
		t.Errorf("%s: %d non-2xx, %d socket errors", host, r.Non2xx, r.SocketErrors)
	}
	return run
}

// runWrk runs wrk -t2 -c50 --latency for d against url with a Host
// header and, when closeConn, "Connection: close" on every request.
func runWrk(t *testing.T, url, host string, closeConn bool, d time.Duration) wrkResult {
	t.Helper()
	var headers []string
	if closeConn {
		headers = []string{"Connection: close"}
	}
	return runWrkHeaders(t, url, host, headers, d)
}

// runWrkHeaders is runWrk with extra request headers.
func runWrkHeaders(t *testing.T, url, host string, headers []string, d time.Duration) wrkResult {
	t.Helper()
	args := []string{"-t2", "-c50", "-d" + strconv.Itoa(int(d.Seconds())) + "s", "--latency", "-H", "Host: " + host}
	for _, h := range headers {
		args = append(args, "-H", h)
	}
	args = append(args, url)
	out, err := exec.Command("wrk", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	return r
}

var (
	wrkPercentile = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkRPS        = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkRequests   = regexp.MustCompile(`(?m)^\s+([0-9]+) requests in `)
	wrkNon2xx     = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: ([0-9]+)`)
	wrkSocketErrs = regexp.MustCompile(`(?m)^\s+Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec line")
	}
	r.RPS, _ = strconv.ParseFloat(m[1], 64)
	if m := wrkRequests.FindStringSubmatch(out); m != nil {
		r.Requests, _ = strconv.Atoi(m[1])
	}
	for _, m := range wrkPercentile.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch m[3] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		if m[1] == "50" {
			r.P50ms = v
		} else {
			r.P99ms = v
		}
	}
	if r.P50ms == 0 || r.P99ms == 0 {
		return r, fmt.Errorf("no latency distribution")
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		r.Non2xx, _ = strconv.Atoi(m[1])
	}
	if m := wrkSocketErrs.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.Atoi(s)
			r.SocketErrors += n
		}
	}
	return r, nil
}

// procMem is the memory of one process, in KiB: VmRSS from
// /proc/PID/status, and from smaps_rollup the proportional set size (shared
// pages divided among the processes sharing them) and the private pages
// (what the process alone costs).
type procMem struct {
	PID       int    `json:"pid"`
	Role      string `json:"role"` // master or worker
	VmRSSKiB  int    `json:"vm_rss_kib"`
	PssKiB    int    `json:"pss_kib"`
	PrivKiB   int    `json:"private_kib"`
	Cmdline   string `json:"cmdline"`
	ParentPID int    `json:"ppid"`
}

func readMem(pid int, role string) (procMem, error) {
	m := procMem{PID: pid, Role: role}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	m.VmRSSKiB = kib(status, "VmRSS:")
	m.ParentPID = kib(status, "PPid:")
	if rollup, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid)); err == nil {
		m.PssKiB = kib(rollup, "Pss:")
		m.PrivKiB = kib(rollup, "Private_Clean:") + kib(rollup, "Private_Dirty:")
	}
	cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	m.Cmdline = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
	return m, nil
}

// kib finds "key   123 kB" in a /proc file and returns 123.
func kib(b []byte, key string) int {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, key) {
			f := strings.Fields(line[len(key):])
			if len(f) > 0 {
				n, _ := strconv.Atoi(f[0])
				return n
			}
		}
	}
	return 0
}

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		status, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		if kib(status, "PPid:") == pid {
			out = append(out, child)
		}
	}
	sort.Ints(out)
	return out
}

// pairMem reads the master and its workers.
func pairMem(t *testing.T, master int) []procMem {
	t.Helper()
	m, err := readMem(master, "master")
	if err != nil {
		t.Fatal(err)
	}
	out := []procMem{m}
	for _, w := range children(master) {
		if wm, err := readMem(w, "worker"); err == nil {
			out = append(out, wm)
		}
	}
	if len(out) != 2 {
		t.Fatalf("haproxy master %d: want one worker, found %d processes: %+v", master, len(out), out)
	}
	return out
}
