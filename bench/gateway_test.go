package bench

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// TestGatewayRoutingFixture renders the Gateway fixture at both sizes and
// checks that its routing lines do not grow with the routes: header and
// path matches ride the maps (no run of HAProxy; cheap, runs always).
func TestGatewayRoutingFixture(t *testing.T) {
	frontend := func(n int) []string {
		conf, _, err := GatewayRoutingConfig(n, 1, 2, 8080, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		in := false
		for _, l := range strings.Split(string(conf), "\n") {
			switch {
			case strings.HasPrefix(l, "frontend "):
				in = true
			case l == "" || !strings.HasPrefix(l, " "):
				in = false
			}
			if in && !strings.HasPrefix(l, "frontend ") {
				lines = append(lines, l)
			}
		}
		return lines
	}
	small, large := frontend(10), frontend(2000)
	if len(small) == 0 || len(small) != len(large) {
		t.Fatalf("frontend lines: %d at 10 rules, %d at 2,000; want the same, non-zero", len(small), len(large))
	}
}

// TestGatewayRouting: a Gateway whose routes mix header and
// path matches, at 10 and 2,000 rules, first route (Exact path and a
// header) and last (the host-less catch-all), side by side with the
// Ingress path's RoutingConfig at the same sizes, keep-alive, interleaved
// rounds. The Gateway must cost the same per request at 10 and 2,000
// rules within 5%.
func TestGatewayRouting(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "wrk")
	rounds, d, warmup := 3, 5*time.Second, time.Second
	if quick() {
		rounds, d = 1, time.Second
	}
	target := harness.StartEcho(t, DataPlaneTarget, "target-pod")
	decoy := harness.FreePort(t) // nothing listens: a decoy route answers 503
	root := harness.ShortTempDir(t)
	insts := map[string]proxyInstance{} // "<config>/<rules>"
	sizes := []int{10, 2000}
	for _, n := range sizes {
		for _, config := range []string{"gateway", "ingress"} {
			dir := filepath.Join(root, fmt.Sprintf("%s-%d", config, n))
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			port := harness.FreePort(t)
			build := GatewayRoutingConfig
			if config == "ingress" {
				build = RoutingConfig
			}
			conf, _, err := build(n, int32(target), int32(decoy), port, dir)
			if err != nil {
				t.Fatal(err)
			}
			insts[fmt.Sprintf("%s/%d", config, n)] = startConfig(t, dir, conf, port)
		}
	}
	hosts := map[string]string{"first": RoutingFirstHost, "last": RoutingLastHost}
	headers := []string{GatewayBenchHeader + ": " + GatewayBenchHeaderValue}
	client := &http.Client{Timeout: 5 * time.Second}
	for key, in := range insts {
		for route, host := range hosts {
			req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(in.port)+DataPlanePath, nil)
			req.Host = host
			req.Header.Set(GatewayBenchHeader, GatewayBenchHeaderValue)
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s %s route: %v %v, want 200 from the target", key, route, resp, err)
			}
			resp.Body.Close()
		}
		if strings.HasPrefix(key, "gateway") {
			// Without the header, the first route's request is not the
			// first rule's: it falls to the catch-all, also the target,
			// so check a decoy rule's header match instead.
			req, _ := http.NewRequest("GET", "http://127.0.0.1:"+strconv.Itoa(in.port)+"/api/v1/x", nil)
			req.Host = "r00001.bench.example"
			req.Header.Set("X-Tenant", "t1")
			resp, err := client.Do(req)
			if err != nil || resp.StatusCode != 503 {
				t.Fatalf("%s: a decoy header rule answered %v %v, want 503", key, resp, err)
			}
			resp.Body.Close()
		}
	}
	measure := func(round, n int, route, config string) routingRun {
		run := measureRun(t, insts[config+"/"+strconv.Itoa(n)], DataPlanePath, hosts[route], headers, d)
		run.Round, run.Routes, run.Route, run.Config = round, n, route, config
		t.Logf("round %d %4d rules %-5s %-8s %8.0f req/s  %5.1f µs CPU/req  non-2xx %d  load %.2f",
			round, n, route, config, run.RPS, run.CPUPerReqU, run.Non2xx, run.LoadAvg)
		return run
	}
	for _, in := range insts {
		runWrkHeaders(t, "http://127.0.0.1:"+strconv.Itoa(in.port)+DataPlanePath, RoutingFirstHost, headers, warmup)
	}
	var runs []routingRun
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		for _, route := range []string{"first", "last"} {
			keys := []struct {
				n      int
				config string
			}{{10, "gateway"}, {2000, "gateway"}, {10, "ingress"}, {2000, "ingress"}}
			if round%2 == 0 {
				slices.Reverse(keys)
			}
			for _, k := range keys {
				runs = append(runs, measure(round, k.n, route, k.config))
			}
		}
	}
	writeJSON(t, out, "gateway-routing.json", map[string]any{"runs": runs, "duration_s": time.Since(began).Seconds(),
		"wrk": "wrk -t2 -c50 --latency (keep-alive), header " + headers[0], "path": DataPlanePath})
	md := gatewayRoutingMarkdown(runs)
	t.Logf("\n%s", md)
	if err := os.WriteFile(filepath.Join(out, "gateway-routing.md"), []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gatewayRoutingMarkdown: medians per (rules, route, config), and the
// ratios computed per round, then their median (min–max): 2,000 rules
// against 10 for each config, and the Gateway against the Ingress path.
func gatewayRoutingMarkdown(runs []routingRun) string {
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
	values := func(rs []routingRun, f func(routingRun) float64) []float64 {
		var xs []float64
		for _, r := range rs {
			xs = append(xs, f(r))
		}
		return xs
	}
	ratio := func(a, b []routingRun, f func(routingRun) float64) string {
		var xs []float64
		for i := range min(len(a), len(b)) {
			if f(b[i]) > 0 {
				xs = append(xs, f(a[i])/f(b[i]))
			}
		}
		if len(xs) == 0 {
			return "–"
		}
		return fmt.Sprintf("**%.2f** (%.2f–%.2f)", medianOf(xs), slices.Min(xs), slices.Max(xs))
	}
	rps := func(r routingRun) float64 { return r.RPS }
	cpu := func(r routingRun) float64 { return r.CPUPerReqU }
	p("| config | route | 10 rules req/s | 2,000 rules req/s | 2,000 ÷ 10 req/s (min–max) | 10 rules CPU/req | 2,000 rules CPU/req | 2,000 ÷ 10 CPU/req (min–max) |\n")
	p("|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, config := range []string{"gateway", "ingress"} {
		for _, route := range []string{"first", "last"} {
			s, l := pick(10, route, config), pick(2000, route, config)
			p("| %s | %s | %.0f | %.0f | %s | %.1f µs | %.1f µs | %s |\n", config, route,
				medianOf(values(s, rps)), medianOf(values(l, rps)), ratio(l, s, rps),
				medianOf(values(s, cpu)), medianOf(values(l, cpu)), ratio(l, s, cpu))
		}
	}
	p("\n| rules | route | Gateway ÷ Ingress req/s (min–max) | Gateway ÷ Ingress CPU/req (min–max) |\n")
	p("|---:|---|---:|---:|\n")
	for _, n := range []int{10, 2000} {
		for _, route := range []string{"first", "last"} {
			g, i := pick(n, route, "gateway"), pick(n, route, "ingress")
			p("| %d | %s | %s | %s |\n", n, route, ratio(g, i, rps), ratio(g, i, cpu))
		}
	}
	return b.String()
}
