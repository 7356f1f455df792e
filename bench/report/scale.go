package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// scaleRun is one size of bench/scale_test.go's scale.json (the fields the
// report reads).
type scaleRun struct {
	Ingresses  int           `json:"ingresses"`
	Processes  int           `json:"haproxy_processes_flag"`
	ServingSec float64       `json:"serving_s"`
	ReadP50    float64       `json:"ingress_read_p50_ms"`
	ReadP99    float64       `json:"ingress_read_p99_ms"`
	LoadStart  float64       `json:"load_avg_start"`
	LoadEnd    float64       `json:"load_avg_end"`
	Series     []scaleSeries `json:"series"`
	Traffic    []trafficRun  `json:"traffic"`
}

// trafficRun is one wrk run of TestScale's traffic measurement
// (bench/scaletraffic_test.go).
type trafficRun struct {
	Round       int     `json:"round"`
	Mode        string  `json:"mode"`
	Target      string  `json:"target"` // pier, reference or direct
	RPS         float64 `json:"rps"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	CPUPerReqUs float64 `json:"cpu_per_req_us"`
}

type scaleSeries struct {
	Kind           string            `json:"kind"`
	Samples        []json.RawMessage `json:"samples"`
	P50            float64           `json:"p50_ms"`
	P99            float64           `json:"p99_ms"`
	Min            float64           `json:"min_ms"`
	Max            float64           `json:"max_ms"`
	LoadedP50      float64           `json:"manifests_loaded_p50_ms"`
	StoredP50      float64           `json:"stored_p50_ms"`
	AppliedP50     float64           `json:"applied_p50_ms"`
	CheckP50       float64           `json:"pier_check_p50_ms"`
	ReloadP50      float64           `json:"pier_reload_p50_ms"`
	BareCheckP50   float64           `json:"bare_check_p50_ms"`
	PierCPU        float64           `json:"pier_cpu_per_change_ms"`
	ScrapeCPU      float64           `json:"pier_cpu_per_scrape_ms"`
	Reloads        float64           `json:"reloads"`
	RuntimeUpdates float64           `json:"runtime_updates"`
	WorkersBefore  []int             `json:"haproxy_workers_before"`
	WorkersAfter   []int             `json:"haproxy_workers_after"`
	Landed         int               `json:"landed"`
	FoldReloads    float64           `json:"fold_reloads"`
	// BeforeServed are the reloads counted between each change and its
	// first 200, summed over the samples (readScale).
	BeforeServed float64 `json:"-"`
}

// scaleTargets are the targets for each kind of change
// (docs/benchmarks.md): p50 and p99 in ms (0: none) and the reloads
// allowed.
var scaleTargets = map[string]struct {
	name     string
	p50, p99 float64
	reloads  string
}{
	"endpoint":    {"endpoint change → new member serves", 0, 10, "0"},
	"new-ingress": {"new Ingress → first 200", 50, 150, "0"},
	"group-join":  {"new Ingress joining a shared group → first 200", 50, 150, "0"},
}

func readScale(path string) ([]scaleRun, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	// TestScale's scale.json is the list of runs; a results file of
	// bench/run.sh scale holds it under "scale".
	var wrapped struct {
		Scale json.RawMessage `json:"scale"`
	}
	if json.Unmarshal(b, &wrapped) == nil && len(wrapped.Scale) > 0 {
		b = wrapped.Scale
	}
	var runs []scaleRun
	if err := json.Unmarshal(b, &runs); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Ingresses < runs[j].Ingresses })
	for _, r := range runs {
		for i := range r.Series {
			s := &r.Series[i]
			for _, raw := range s.Samples {
				var smp struct {
					ReloadsBeforeServed float64 `json:"reloads_before_first_200"`
				}
				if json.Unmarshal(raw, &smp) == nil {
					s.BeforeServed += smp.ReloadsBeforeServed
				}
			}
		}
	}
	return runs, b, nil
}

// scaleMarkdown is the table of every series against its target.
func scaleMarkdown(runs []scaleRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("| Ingresses present | change | samples | p50 | p99 | target p50 / p99 | min–max | reloads | manifests read | stored | applied (logged) | pier check / reload | load |\n")
	p("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range runs {
		for _, s := range r.Series {
			tg := scaleTargets[s.Kind]
			target := fmt.Sprintf("≤ %.0f / ≤ %.0f ms", tg.p50, tg.p99)
			if tg.p50 == 0 {
				target = fmt.Sprintf("– / ≤ %.0f ms", tg.p99)
			}
			check := fmt.Sprintf("%.0f / %.0f ms", s.CheckP50, s.ReloadP50)
			if s.Kind == "endpoint" {
				check = fmt.Sprintf("runtime API; bare `haproxy -c` of the fragment %.0f ms", s.BareCheckP50)
				if s.PierCPU > 0 {
					check += fmt.Sprintf("; pier's CPU %.0f ms a change, its `haproxy -c` included", s.PierCPU)
					if s.ScrapeCPU > 0 {
						check += fmt.Sprintf(", the bench's /metrics scrapes (%.0f ms each) left out", s.ScrapeCPU)
					}
				}
			}
			p("| %s | %s | %d | **%.0f ms** | **%.0f ms** | %s | %.0f–%.0f ms | %s (target %s) | %.0f ms | %.0f ms | %.0f ms | %s | %.1f → %.1f |\n",
				thousands(float64(r.Ingresses)), tg.name, len(s.Samples), s.P50, s.P99, target, s.Min, s.Max,
				thousands(s.Reloads), tg.reloads, s.LoadedP50, s.StoredP50, s.AppliedP50, check, r.LoadStart, r.LoadEnd)
		}
	}
	p("\nTimes from the manifest's rename into the watched folder; \"manifests read\", \"stored\" and \"applied\" are medians of the times of pier's log lines `manifests changed`, `load balancer stored` and `members updated without reload`, `routes updated without reload`, `load balancer landed without reload` or `haproxy reloaded` (millisecond resolution; a reload is logged after `show proc` confirms it, so it can come after the first 200). p99 is the nearest rank, so below 100 samples it is the largest sample.\n")
	for _, r := range runs {
		p("\n%s Ingresses: all serving %.1f s after pier started.", thousands(float64(r.Ingresses)), r.ServingSec)
		if r.ReadP50 > 0 {
			p(" At rest, GET /ingresses/NS/NAME of pier's API took %.2f ms (p50) and %.2f ms (p99) over 100 Ingresses.", r.ReadP50, r.ReadP99)
		}
		for _, s := range r.Series {
			if s.Kind == "endpoint" {
				p(" Endpoint changes: %s reloads counted by pier, %s runtime updates, HAProxy workers %v before and %v after (a reload would replace a shard's worker).",
					thousands(s.Reloads), thousands(s.RuntimeUpdates), s.WorkersBefore, s.WorkersAfter)
			}
			if s.Kind == "new-ingress" && s.Landed > 0 {
				p(" New Ingresses: %d of %d served by the landing process without a reload; %s reloads counted between a change and its first 200; %s deferred fold-in reloads loaded them into their shards afterwards (the reloads column counts those that fell within a sample).",
					s.Landed, len(s.Samples), thousands(s.BeforeServed), thousands(s.FoldReloads))
			}
		}
	}
	b.WriteString("\n")
	return b.String()
}

// trafficMarkdown is the data plane with n Ingresses present: medians
// over the rounds for pier, the hand-written reference and direct, and
// pier ÷ reference per round (median, smallest–largest).
func trafficMarkdown(runs []scaleRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("| Ingresses present | connections | req/s pier / reference / direct | pier ÷ reference req/s | p50 ms pier / reference / direct | p99 ms pier / reference / direct | CPU µs/request pier / reference | pier ÷ reference CPU |\n")
	p("|---:|---|---|---|---|---|---|---|\n")
	found := false
	for _, r := range runs {
		for _, mode := range []string{"keep-alive", "close"} {
			by := map[string]map[int]trafficRun{}
			for _, tr := range r.Traffic {
				if tr.Mode != mode {
					continue
				}
				if by[tr.Target] == nil {
					by[tr.Target] = map[int]trafficRun{}
				}
				by[tr.Target][tr.Round] = tr
			}
			if len(by["pier"]) == 0 {
				continue
			}
			found = true
			med := func(target string, f func(trafficRun) float64) float64 {
				var xs []float64
				for _, tr := range by[target] {
					xs = append(xs, f(tr))
				}
				return median(xs)
			}
			ratio := func(f func(trafficRun) float64) string {
				var xs []float64
				for round, pt := range by["pier"] {
					if rt, ok := by["reference"][round]; ok && f(rt) > 0 {
						xs = append(xs, f(pt)/f(rt))
					}
				}
				if len(xs) == 0 {
					return "–"
				}
				return fmt.Sprintf("**%.2f** (%.2f–%.2f)", median(xs), minOf(xs), maxOf(xs))
			}
			rps := func(tr trafficRun) float64 { return tr.RPS }
			p50 := func(tr trafficRun) float64 { return tr.P50ms }
			p99 := func(tr trafficRun) float64 { return tr.P99ms }
			cpu := func(tr trafficRun) float64 { return tr.CPUPerReqUs }
			p("| %s | %s | %s / %s / %s | %s | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.1f / %.1f | %s |\n",
				thousands(float64(r.Ingresses)), mode,
				thousands(med("pier", rps)), thousands(med("reference", rps)), thousands(med("direct", rps)), ratio(rps),
				med("pier", p50), med("reference", p50), med("direct", p50),
				med("pier", p99), med("reference", p99), med("direct", p99),
				med("pier", cpu), med("reference", cpu), ratio(cpu))
		}
	}
	if !found {
		return ""
	}
	p("\nwrk -t2 -c50 to the last Ingress present: through pier (its shard packs about a quarter of the load balancers), through a hand-written HAProxy config routing that one host to the same backend, and direct to the backend (a Go echo server); interleaved in each round. pier's CPU is every HAProxy process of the node, less the idle rate (the shards' health checks) measured just before.\n")
	return b.String()
}

// newIngressChart is chart (a): a new Ingress's p50 and p99 against the
// number present, for a load balancer of its own and for joining a
// shared group, with the targets as lines.
func newIngressChart(runs []scaleRun, path string) barChart {
	c := barChart{Title: "New Ingress: manifest write to first 200 (4 shards)", YLabel: "MS (LOG)", Note: "bench/results/" + filepath.Base(path), Log: true}
	vals := map[string][]float64{}
	kinds := []string{"new-ingress p50", "new-ingress p99", "group-join p50", "group-join p99"}
	for _, r := range runs {
		c.Groups = append(c.Groups, thousands(float64(r.Ingresses))+" present")
		for _, k := range kinds {
			vals[k] = append(vals[k], math.NaN())
		}
		for _, s := range r.Series {
			if k := s.Kind + " p50"; vals[k] != nil {
				vals[k][len(vals[k])-1] = s.P50
				vals[s.Kind+" p99"][len(vals[k])-1] = s.P99
			}
		}
	}
	names := map[string]string{"new-ingress p50": "own LB p50", "new-ingress p99": "own LB p99",
		"group-join p50": "shared group p50", "group-join p99": "shared group p99"}
	for i, k := range kinds {
		c.Series = append(c.Series, barSeries{Name: names[k], Color: palette[i], Values: vals[k]})
	}
	c.Lines = []refLine{{Label: "target p50 50 ms", Value: 50, Color: palette[2]}, {Label: "target p99 150 ms", Value: 150, Color: palette[4]}}
	return c
}

// routingChart is chart (b): the median req/s of each configuration
// TestRouting measured at each size and route (pier, the hand-written map
// config, and nginx when the run has it).
func routingChart(path string) (barChart, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return barChart{}, err
	}
	var in struct {
		Runs []struct {
			Routes int     `json:"routes"`
			Route  string  `json:"route"`
			Config string  `json:"config"`
			RPS    float64 `json:"rps"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return barChart{}, fmt.Errorf("%s: %w", path, err)
	}
	type key struct {
		routes int
		route  string
	}
	rps := map[string]map[key][]float64{}
	var keys []key
	seen := map[key]bool{}
	for _, r := range in.Runs {
		if r.Config != "pier" && r.Config != "reference" && r.Config != "nginx" {
			continue // the extras' variants
		}
		k := key{r.Routes, r.Route}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if rps[r.Config] == nil {
			rps[r.Config] = map[key][]float64{}
		}
		rps[r.Config][k] = append(rps[r.Config][k], r.RPS)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].routes != keys[j].routes {
			return keys[i].routes < keys[j].routes
		}
		return keys[i].route < keys[j].route
	})
	c := barChart{Title: "Routing, keep-alive: req/s, median of rounds", YLabel: "REQ/S", Note: "bench/results/" + filepath.Base(path)}
	for _, k := range keys {
		c.Groups = append(c.Groups, fmt.Sprintf("%s route\nof %s", k.route, thousands(float64(k.routes))))
	}
	for i, cfg := range []struct{ key, name string }{{"pier", "pier"}, {"reference", "hand-written map config"}, {"nginx", "nginx"}} {
		if rps[cfg.key] == nil {
			continue
		}
		s := barSeries{Name: cfg.name, Color: palette[i]}
		for _, k := range keys {
			v := math.NaN()
			if xs := rps[cfg.key][k]; len(xs) > 0 {
				v = median(xs)
			}
			s.Values = append(s.Values, v)
		}
		c.Series = append(c.Series, s)
	}
	if len(c.Series) == 0 {
		return c, fmt.Errorf("%s: no pier or reference runs", path)
	}
	return c, nil
}

// scaleReport writes OUT.md and OUT.json for `bench/run.sh scale`, and
// the charts into chartsDir when set.
func scaleReport(scalePath, routingPath, out, chartsDir string) error {
	scaleSource := scalePath // named in the chart: the results file when -out writes one
	if out != "" {
		scaleSource = out + ".json"
	}
	var runs []scaleRun
	var raw []byte
	if scalePath != "" {
		var err error
		if runs, raw, err = readScale(scalePath); err != nil {
			return err
		}
	}
	if out != "" && runs != nil {
		m := meta(filepath.Dir(scalePath))
		md := fmt.Sprintf("# pier at scale, %s, %s\n\nMachine: %s, %d CPUs, Linux %s; load average %s at the start, %s at the end; %s; %s. The run took %.0f s. `pier run --haproxy-processes %d`; docs/benchmarks.md section 9 explains the figures.\n\n",
			m.Date, m.GitRev, m.CPU, m.CPUs, m.Kernel, m.LoadStart, m.LoadEnd, m.Go, m.HAProxy, m.DurationSec, runs[0].Processes) + scaleMarkdown(runs)
		if tm := trafficMarkdown(runs); tm != "" {
			md += "\n## Requests with these Ingresses present\n\n" + tm
		}
		js, err := json.MarshalIndent(struct {
			Meta  Meta            `json:"meta"`
			Scale json.RawMessage `json:"scale"`
		}{m, raw}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(out+".md", []byte(md), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(out+".json", append(js, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Print(md)
		fmt.Fprintf(os.Stderr, "wrote %s.md and %s.json\n", out, out)
	}
	if chartsDir == "" {
		return nil
	}
	if err := os.MkdirAll(chartsDir, 0o755); err != nil {
		return err
	}
	if runs != nil {
		p := filepath.Join(chartsDir, "new-ingress-latency.png")
		if err := newIngressChart(runs, scaleSource).writePNG(p); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", p)
	}
	if routingPath != "" {
		c, err := routingChart(routingPath)
		if err != nil {
			return err
		}
		p := filepath.Join(chartsDir, "routing-rps.png")
		if err := c.writePNG(p); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "wrote", p)
	}
	return nil
}
