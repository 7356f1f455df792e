package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/process"
	"pier.dev/pier/test/harness"
)

// versionRun is one wrk run of TestDataPlaneVersions.
type versionRun struct {
	Round   int    `json:"round"`
	Mode    string `json:"mode"`    // keep-alive or close
	Config  string `json:"config"`  // pier or reference
	HAProxy string `json:"haproxy"` // 2.6 or 3.0 (the binary's major.minor)
	wrkResult
	LoadAvg float64 `json:"load_avg"`
}

type versionResult struct {
	Wrk         string            `json:"wrk"`
	Binaries    map[string]string `json:"binaries"` // version -> `haproxy -v` first line
	Runs        []versionRun      `json:"runs"`
	StartedAt   time.Time         `json:"started_at"`
	DurationSec float64           `json:"duration_s"`
	LoadStart   string            `json:"loadavg_start"`
}

// TestDataPlaneVersions is TestDataPlane's comparison under two HAProxy
// builds at once: the host's haproxy (Debian bookworm's 2.6, what the
// suites run) and PIER_BENCH_HAPROXY30 (Debian trixie's 3.0, what pier's
// agent image ships; hack/haproxy30.sh prints one). Four instances, pier's
// config and the hand-written reference under each binary, all in front
// of the same echo backend, measured in turn in every round so that the
// machine's load falls on all four alike. Writes versions.json and
// versions.md into PIER_BENCH_OUT. PIER_BENCH_VERSIONS_ROUNDS (default 3)
// and PIER_BENCH_VERSIONS_SECONDS (default 10) shorten it.
func TestDataPlaneVersions(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "wrk")
	bin30 := os.Getenv("PIER_BENCH_HAPROXY30")
	if bin30 == "" {
		t.Skip("PIER_BENCH_HAPROXY30 not set (hack/haproxy30.sh prints a binary)")
	}
	bin26, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal(err)
	}
	rounds, duration, warmup := envInt("PIER_BENCH_VERSIONS_ROUNDS", 3), time.Duration(envInt("PIER_BENCH_VERSIONS_SECONDS", 10))*time.Second, 2*time.Second
	if quick() {
		rounds, duration, warmup = 1, 2*time.Second, time.Second
	}
	res := versionResult{Wrk: fmt.Sprintf("wrk -t2 -c50 -d%ds --latency", int(duration.Seconds())),
		Binaries: map[string]string{}, StartedAt: time.Now().UTC()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		res.LoadStart = strings.TrimSpace(string(b))
	}
	bins := map[string]string{}
	for _, bin := range []string{bin26, bin30} {
		line, ver := haproxyVersion(t, bin)
		bins[ver] = bin
		res.Binaries[ver] = line
	}
	if len(bins) != 2 {
		t.Fatalf("%s and %s are the same HAProxy version: %v", bin26, bin30, res.Binaries)
	}
	versions := make([]string, 0, 2)
	for v := range bins {
		versions = append(versions, v)
	}
	sort.Strings(versions)

	target := harness.StartEcho(t, DataPlaneTarget, "target-pod")
	decoy := harness.StartEcho(t, "decoy", "decoy-pod")
	root := harness.ShortTempDir(t)
	type instance struct{ name, config, version, url string }
	var instances []instance
	for _, v := range versions {
		for _, c := range []string{"pier", "reference"} {
			dir := filepath.Join(root, c+"-"+v)
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			port := harness.FreePort(t)
			var conf []byte
			if c == "pier" {
				if conf, _, err = DataPlaneConfig(int32(target), int32(decoy), "127.0.0.1", port, dir); err != nil {
					t.Fatal(err)
				}
			} else {
				conf = ReferenceConfig("127.0.0.1:"+strconv.Itoa(port), "127.0.0.1:"+strconv.Itoa(target))
			}
			cfg := filepath.Join(dir, "haproxy.conf")
			if err := os.WriteFile(cfg, conf, 0o600); err != nil {
				t.Fatal(err)
			}
			startHAProxyBinary(t, bins[v], dir, cfg)
			client := &http.Client{Timeout: 5 * time.Second}
			code, reply, _, err := harness.Get(client, "127.0.0.1", port, DataPlaneHost, "/routed-by-last-policy")
			if err != nil || code != 200 || reply.Service != DataPlaneTarget {
				t.Fatalf("%s under %s: GET /routed-by-last-policy: %d %+v %v, want 200 from %s", c, v, code, reply, err, DataPlaneTarget)
			}
			if body, err := getBody(client, port, DataPlaneHost, DataPlanePath); err != nil || body != "ok" {
				t.Fatalf("%s under %s: GET %s: %q %v, want ok", c, v, DataPlanePath, body, err)
			}
			instances = append(instances, instance{c + "@" + v, c, v, "http://127.0.0.1:" + strconv.Itoa(port) + DataPlanePath})
		}
	}
	for _, in := range instances {
		runWrk(t, in.url, DataPlaneHost, false, warmup)
	}
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		for _, mode := range []string{"keep-alive", "close"} {
			for _, in := range instances {
				r := runWrk(t, in.url, DataPlaneHost, mode == "close", duration)
				run := versionRun{Round: round, Mode: mode, Config: in.config, HAProxy: in.version, wrkResult: r, LoadAvg: loadAvg()}
				t.Logf("round %d %-10s %-15s %9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  non-2xx %d  socket errors %d  load %.2f",
					round, mode, in.name, r.RPS, r.P50ms, r.P99ms, r.Non2xx, r.SocketErrors, run.LoadAvg)
				if r.Non2xx > 0 {
					t.Errorf("%s %s round %d: %d responses were not 2xx", in.name, mode, round, r.Non2xx)
				}
				res.Runs = append(res.Runs, run)
			}
		}
	}
	res.DurationSec = time.Since(began).Seconds()
	writeJSON(t, out, "versions.json", res)
	md := versionsMarkdown(res, versions)
	t.Log("\n" + md)
	if err := os.WriteFile(filepath.Join(out, "versions.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// versionsMarkdown tabulates medians over the rounds and the ratios that
// mean something on a loaded machine: each version's pier/reference, and
// 3.0 against 2.6 for each config.
func versionsMarkdown(res versionResult, versions []string) string {
	med := func(mode, config, version string, f func(wrkResult) float64) float64 {
		var xs []float64
		for _, r := range res.Runs {
			if r.Mode == mode && r.Config == config && r.HAProxy == version {
				xs = append(xs, f(r.wrkResult))
			}
		}
		sort.Float64s(xs)
		if len(xs) == 0 {
			return 0
		}
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	rps := func(r wrkResult) float64 { return r.RPS }
	p99 := func(r wrkResult) float64 { return r.P99ms }
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	rounds := 0
	for _, r := range res.Runs {
		rounds = max(rounds, r.Round)
	}
	old, cur := versions[0], versions[1]
	var b strings.Builder
	fmt.Fprintf(&b, "# Data plane under HAProxy %s and %s\n\n", old, cur)
	fmt.Fprintf(&b, "Started %s, %d rounds of `%s` per instance and mode, load average at start %s.\n\n",
		res.StartedAt.Format(time.RFC3339), rounds, res.Wrk, res.LoadStart)
	for _, v := range versions {
		fmt.Fprintf(&b, "- %s: %s\n", v, res.Binaries[v])
	}
	b.WriteString("\nMedians over the rounds; req/s higher is better, p99 in ms.\n\n")
	fmt.Fprintf(&b, "| mode | pier %s | ref %s | pier %s | ref %s | pier/ref %s | pier/ref %s | pier %s/%s | ref %s/%s | p99 pier %s | p99 pier %s |\n",
		old, old, cur, cur, old, cur, cur, old, cur, old, old, cur)
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, mode := range []string{"keep-alive", "close"} {
		po, ro := med(mode, "pier", old, rps), med(mode, "reference", old, rps)
		pc, rc := med(mode, "pier", cur, rps), med(mode, "reference", cur, rps)
		fmt.Fprintf(&b, "| %s | %.0f | %.0f | %.0f | %.0f | %s | %s | %s | %s | %.2f | %.2f |\n", mode,
			po, ro, pc, rc, ratio(po, ro), ratio(pc, rc), ratio(pc, po), ratio(rc, ro),
			med(mode, "pier", old, p99), med(mode, "pier", cur, p99))
	}
	return b.String()
}

// haproxyVersion returns the first line of `bin -v` and its major.minor.
func haproxyVersion(t *testing.T, bin string) (line, version string) {
	t.Helper()
	out, err := exec.Command(bin, "-v").Output()
	if err != nil {
		t.Fatalf("%s -v: %v", bin, err)
	}
	line, _, _ = strings.Cut(string(out), "\n")
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "HAProxy" {
		t.Fatalf("%s -v: unexpected %q", bin, line)
	}
	parts := strings.SplitN(f[2], ".", 3)
	if len(parts) < 2 {
		t.Fatalf("%s -v: no major.minor in %q", bin, line)
	}
	return line, parts[0] + "." + parts[1]
}

// startHAProxyBinary is startHAProxy with a given haproxy executable.
func startHAProxyBinary(t *testing.T, bin, dir, cfg string) *process.Instance {
	t.Helper()
	inst := process.New(process.Config{Binary: bin, Dir: dir, ConfigFiles: []string{cfg},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), StopTimeout: 20 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := inst.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := inst.Stop(ctx); err != nil {
			t.Errorf("stop haproxy in %s: %v", dir, err)
		}
	})
	return inst
}

// envInt reads a positive integer from the environment, def if unset.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}
