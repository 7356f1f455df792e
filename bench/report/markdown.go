package main

import (
	"fmt"
	"strings"
)

// markdown renders the report as the .md file (and what run.sh prints).
func markdown(r *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Meta
	p("# pier benchmarks, %s, %s\n\n", m.Date, m.GitRev)
	p("Machine: %s, %d CPUs, Linux %s; load average (1/5/15 min) %s at the start, %s at the end. %s; %s; %s. The run took %.0f s.\n\n",
		m.CPU, m.CPUs, m.Kernel, m.LoadStart, m.LoadEnd, m.Go, m.HAProxy, m.Wrk, m.DurationSec)
	p("Every ratio is pier ÷ a reference measured in the same invocation, interleaved with it; absolute numbers depend on the machine and its load, ratios much less. See docs/benchmarks.md.\n\n")

	p("## 1. Data plane: pier's config vs a minimal config\n\n")
	p("Same HAProxy, same echo backend, `%s`; each round runs pier then the reference, keep-alive then `Connection: close`; medians over rounds; a ratio is the median of the per-round ratios. ", r.Wrk)
	p("Request: `Host: www.unlisted.example`, `GET /health`, which only the last of pier's 50 policies matches.\n\n")
	p("| connections | rounds | pier req/s | ref req/s | req/s ratio (min–max) | pier p50 | ref p50 | p50 ratio | pier p99 | ref p99 | p99 ratio | non-2xx, socket errors |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, d := range r.DataPlane {
		p("| %s | %d | %s | %s | **%.2f** (%.2f–%.2f) | %.2f ms | %.2f ms | %.2f | %.2f ms | %.2f ms | %.2f | %d, %d |\n",
			d.Mode, d.Rounds, thousands(d.PierRPS), thousands(d.RefRPS), d.RatioRPS, d.RatioRPSRange[0], d.RatioRPSRange[1],
			d.PierP50, d.RefP50, d.RatioP50, d.PierP99, d.RefP99, d.RatioP99, d.Non2xx, d.SocketErrors)
	}

	p("\n## 2. Control plane: translate.Ingresses + render.Config of every load balancer\n\n")
	p("Go benchmarks (`-benchmem -count %d`), medians. Reference: `json.Marshal` of the same snapshot, run right after. ", r.ControlPlane[0].Samples)
	p("`ingresses=N`: N Ingresses, one load balancer each, all rendered; `group-paths=1000`: one shared load balancer with 1,000 paths.\n\n")
	p("| snapshot | LBs | pier time/op | pier B/op | pier allocs/op | json time/op | json B/op | json allocs/op | time ratio (min–max) | B ratio | allocs ratio | pier per LB |\n")
	p("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range r.ControlPlane {
		p("| %s | %s | %s | %s | %s | %s | %s | %s | **%.1f** (%.1f–%.1f) | %.1f | %.0f | %s |\n",
			c.Case, thousands(float64(c.LBs)), duration(c.PierNs), bytesIEC(c.PierBytes), count(c.PierAllocs),
			duration(c.JSONNs), bytesIEC(c.JSONBytes), count(c.JSONAllocs),
			c.RatioNs, c.RatioNsRange[0], c.RatioNsRange[1], c.RatioBytes, c.RatioAllocs, duration(c.NsPerLB))
	}

	rl := r.Reload
	p("\n## 3. Reload: manifest change → new route answering, through `pier run`\n\n")
	p("%d changes, each adding a path to one Ingress (haproxy.conf %s). Reference: a bare `haproxy -c` of the same haproxy.conf after each change.\n\n",
		rl.Changes, bytesIEC(float64(rl.ConfigBytes)))
	p("| | median | p95 | min | max | median ÷ bare `haproxy -c` median |\n|---|---:|---:|---:|---:|---:|\n")
	row := func(name string, d Dist, ratio string) {
		p("| %s | %.0f ms | %.0f ms | %.0f ms | %.0f ms | %s |\n", name, d.Median, d.P95, d.Min, d.Max, ratio)
	}
	row("file written → route answers", rl.EndToEnd, fmt.Sprintf("**%.1f**", rl.RatioEndToEnd))
	row("pier log: `check_took` (pier's `haproxy -c`)", rl.PierCheck, fmt.Sprintf("%.1f", rl.RatioPierCheck))
	row("pier log: `reload_took` (reload until `show proc` confirms)", rl.PierReload, fmt.Sprintf("**%.1f**", rl.RatioReload))
	row("reference: bare `haproxy -c`", rl.BareCheck, "1")

	p("\n## 4. Memory: one idle HAProxy master+worker pair\n\n")
	p("VmRSS from /proc/PID/status; Pss and private (Private_Clean + Private_Dirty) from /proc/PID/smaps_rollup. RSS counts the shared HAProxy binary and libraries in every process; private pages are what one more pair costs. Reference: the minimal config under the same driver.\n\n")
	p("| pair | policies | master RSS | worker RSS | RSS | Pss | private | RSS ratio | private ratio |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, mr := range r.Memory {
		p("| %s | %d | %.1f MiB | %.1f MiB | **%.1f MiB** | %.1f MiB | **%.1f MiB** | %.2f | %.2f |\n",
			mr.Name, mr.Policies, mr.MasterRSS, mr.WorkerRSS, mr.RSS, mr.Pss, mr.Private, mr.RatioRSS, mr.RatioPriv)
	}
	if r.Web != nil { // web view
		b.WriteString(webMarkdown(r.Web))
	}
	if r.Routing != "" { // routing
		p("\n## 6. Routing: pier's maps vs a hand-written map config, 120 and 2,000 routes\n\n")
		p("Keep-alive `wrk -t2 -c50`, `GET /health`; the first route is policy 1 (an exact host's Exact path), the last the host-less catch-all. Proxy CPU is the HAProxy master and worker's utime+stime over the run ÷ requests. Ratios per round, then the median (min–max).\n\n")
		b.WriteString(r.Routing)
	}
	return b.String()
}

// thousands formats a non-negative number in groups of three: 12,345.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// duration formats nanoseconds.
func duration(ns float64) string {
	switch {
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.1f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	}
	return fmt.Sprintf("%.0f ns", ns)
}

func bytesIEC(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.0f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func count(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}
