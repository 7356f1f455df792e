// Command report turns the raw results of one bench/run.sh invocation into
// bench/results/<date>-<rev>.md and .json: medians, percentiles and every
// figure's ratio to its reference from the same invocation. It measures
// nothing itself; docs/benchmarks.md explains the numbers.
//
//	go run ./bench/report -in RAW_DIR -out bench/results/20260101-abc1234
//
// With -scale (the scale.json of TestScale) it reports that alone, and
// with -charts it draws PNG charts: new-Ingress latency against the
// number of Ingresses (-scale) and routing req/s (-routing, a
// routing.json of TestRouting):
//
//	go run ./bench/report -scale RAW_DIR/scale.json -out bench/results/X-scale \
//	  -routing bench/results/Y-routing.json -charts docs/benchmarks
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	in := flag.String("in", "", "folder with the raw results (controlplane.txt, dataplane.json, reload.json, memory.json, start)")
	out := flag.String("out", "", "output path without extension: writes OUT.md and OUT.json")
	scale := flag.String("scale", "", "scale.json of TestScale (bench/run.sh scale): report it alone, with -out and/or -charts")
	routing := flag.String("routing", "", "routing.json of TestRouting: chart its req/s into -charts")
	charts := flag.String("charts", "", "folder for the PNG charts (new-ingress-latency.png from -scale, routing-rps.png from -routing)")
	kube := flag.String("kube-scale", "", "kube-scale.json of TestKubeScale (bench/run.sh kube-scale): report it alone, with -out")
	flag.Parse()
	if *kube != "" {
		if *out == "" {
			fmt.Fprintln(os.Stderr, "usage: report -kube-scale KUBE_SCALE_JSON -out PATH_WITHOUT_EXTENSION")
			os.Exit(2)
		}
		if err := kubeReport(*kube, *out); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	if *scale != "" || *routing != "" || *charts != "" {
		if err := scaleReport(*scale, *routing, *out, *charts); err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		return
	}
	if *in == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: report -in RAW_DIR -out PATH_WITHOUT_EXTENSION")
		os.Exit(2)
	}
	r, err := build(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	md := markdown(r)
	if err := os.WriteFile(*out+".json", append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out+".md", []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Print(md)
	fmt.Fprintf(os.Stderr, "wrote %s.md and %s.json\n", *out, *out)
}

// Report is the .json file: the summaries, then the raw inputs.
type Report struct {
	Wrk          string         `json:"wrk"`
	Meta         Meta           `json:"meta"`
	DataPlane    []DataPlaneRow `json:"dataplane"`
	ControlPlane []ControlRow   `json:"controlplane"`
	Reload       ReloadSummary  `json:"reload"`
	Memory       []MemoryRow    `json:"memory"`
	Web          *WebResult     `json:"web,omitempty"` // web view: web.go
	// Routing is the routing section as bench/routing_test.go wrote it
	// (routing.md); its raw runs are routing.json, kept as they are.
	Routing    string          `json:"routing,omitempty"`
	RoutingRaw json.RawMessage `json:"routing_raw,omitempty"`
	Raw        Raw             `json:"raw"`
}

type Meta struct {
	Date        string  `json:"date"`
	GitRev      string  `json:"git_rev"`
	CPU         string  `json:"cpu"`
	CPUs        int     `json:"cpus"`
	Kernel      string  `json:"kernel"`
	Go          string  `json:"go"`
	HAProxy     string  `json:"haproxy"`
	Wrk         string  `json:"wrk"`
	LoadStart   string  `json:"load_avg_start"` // /proc/loadavg when run.sh began
	LoadEnd     string  `json:"load_avg_end"`
	DurationSec float64 `json:"duration_s"`
}

type Raw struct {
	DataPlane    json.RawMessage `json:"dataplane"`
	ControlPlane []string        `json:"controlplane_lines"`
	Reload       json.RawMessage `json:"reload"`
	Memory       json.RawMessage `json:"memory"`
}

// ---- data plane

type wrkRun struct {
	Round  int     `json:"round"`
	Mode   string  `json:"mode"`
	Config string  `json:"config"`
	RPS    float64 `json:"rps"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
	Non2xx int     `json:"non_2xx_3xx"`
	Errors int     `json:"socket_errors"`
}

// DataPlaneRow is one mode (keep-alive or close): medians over the rounds
// per config, and the median over rounds of the per-round ratio
// pier/reference (each round ran pier then the reference back to back).
type DataPlaneRow struct {
	Mode          string     `json:"mode"`
	Rounds        int        `json:"rounds"`
	PierRPS       float64    `json:"pier_rps"`
	RefRPS        float64    `json:"reference_rps"`
	RatioRPS      float64    `json:"ratio_rps"`
	RatioRPSRange [2]float64 `json:"ratio_rps_min_max"`
	PierP50       float64    `json:"pier_p50_ms"`
	RefP50        float64    `json:"reference_p50_ms"`
	RatioP50      float64    `json:"ratio_p50"`
	PierP99       float64    `json:"pier_p99_ms"`
	RefP99        float64    `json:"reference_p99_ms"`
	RatioP99      float64    `json:"ratio_p99"`
	Non2xx        int        `json:"non_2xx_3xx"`
	SocketErrors  int        `json:"socket_errors"`
}

func dataPlane(raw []byte) ([]DataPlaneRow, error) {
	var in struct {
		Runs []wrkRun `json:"runs"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	if len(in.Runs) == 0 {
		return nil, fmt.Errorf("no wrk runs")
	}
	var rows []DataPlaneRow
	for _, mode := range []string{"keep-alive", "close"} {
		byRound := map[int]map[string]wrkRun{}
		for _, r := range in.Runs {
			if r.Mode != mode {
				continue
			}
			if byRound[r.Round] == nil {
				byRound[r.Round] = map[string]wrkRun{}
			}
			byRound[r.Round][r.Config] = r
		}
		var pr, rr, p50p, p50r, p99p, p99r, qr, q50, q99 []float64
		row := DataPlaneRow{Mode: mode}
		for _, m := range byRound {
			p, okp := m["pier"]
			ref, okr := m["reference"]
			if !okp || !okr {
				continue
			}
			row.Rounds++
			pr, rr = append(pr, p.RPS), append(rr, ref.RPS)
			p50p, p50r = append(p50p, p.P50), append(p50r, ref.P50)
			p99p, p99r = append(p99p, p.P99), append(p99r, ref.P99)
			qr, q50, q99 = append(qr, p.RPS/ref.RPS), append(q50, p.P50/ref.P50), append(q99, p.P99/ref.P99)
			row.Non2xx += p.Non2xx + ref.Non2xx
			row.SocketErrors += p.Errors + ref.Errors
		}
		if row.Rounds == 0 {
			continue
		}
		row.PierRPS, row.RefRPS, row.RatioRPS = median(pr), median(rr), median(qr)
		row.PierP50, row.RefP50, row.RatioP50 = median(p50p), median(p50r), median(q50)
		row.PierP99, row.RefP99, row.RatioP99 = median(p99p), median(p99r), median(q99)
		row.RatioRPSRange = [2]float64{minOf(qr), maxOf(qr)}
		rows = append(rows, row)
	}
	return rows, nil
}

// ---- control plane

// ControlRow is one snapshot: medians over the -count samples of the pier
// benchmark (translate + render all) and of the json.Marshal baseline.
type ControlRow struct {
	Case         string     `json:"case"`
	Samples      int        `json:"samples"`
	LBs          int        `json:"load_balancers"`
	PierNs       float64    `json:"pier_ns_op"`
	PierBytes    float64    `json:"pier_b_op"`
	PierAllocs   float64    `json:"pier_allocs_op"`
	JSONNs       float64    `json:"json_ns_op"`
	JSONBytes    float64    `json:"json_b_op"`
	JSONAllocs   float64    `json:"json_allocs_op"`
	RatioNs      float64    `json:"ratio_ns"`
	RatioBytes   float64    `json:"ratio_b"`
	RatioAllocs  float64    `json:"ratio_allocs"`
	ConfBytes    float64    `json:"config_bytes_op"`
	NsPerLB      float64    `json:"pier_ns_per_lb"`
	RatioNsRange [2]float64 `json:"ratio_ns_min_max"`
}

func controlPlane(text string) ([]ControlRow, []string) {
	type sample map[string]float64
	samples := map[string][]sample{}
	var order []string
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		lines = append(lines, line)
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i] // the GOMAXPROCS suffix
			}
		}
		s := sample{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				s[f[i+1]] = v
			}
		}
		if _, seen := samples[name]; !seen {
			order = append(order, name)
		}
		samples[name] = append(samples[name], s)
	}
	med := func(name, unit string) float64 {
		var xs []float64
		for _, s := range samples[name] {
			xs = append(xs, s[unit])
		}
		return median(xs)
	}
	var rows []ControlRow
	for _, name := range order {
		if !strings.HasSuffix(name, "/pier") {
			continue
		}
		base := strings.TrimSuffix(name, "/pier")
		ref := base + "/json"
		if len(samples[ref]) == 0 {
			continue
		}
		row := ControlRow{Case: strings.TrimPrefix(base, "BenchmarkControlPlane/"), Samples: len(samples[name]),
			PierNs: med(name, "ns/op"), PierBytes: med(name, "B/op"), PierAllocs: med(name, "allocs/op"),
			JSONNs: med(ref, "ns/op"), JSONBytes: med(ref, "B/op"), JSONAllocs: med(ref, "allocs/op"),
			ConfBytes: med(name, "conf-bytes/op")}
		row.RatioNs, row.RatioBytes, row.RatioAllocs = row.PierNs/row.JSONNs, row.PierBytes/row.JSONBytes, row.PierAllocs/row.JSONAllocs
		// The i-th pier sample against the i-th baseline sample, for the spread.
		var qs []float64
		for i := 0; i < len(samples[name]) && i < len(samples[ref]); i++ {
			qs = append(qs, samples[name][i]["ns/op"]/samples[ref][i]["ns/op"])
		}
		row.RatioNsRange = [2]float64{minOf(qs), maxOf(qs)}
		if _, n, ok := strings.Cut(row.Case, "ingresses="); ok {
			row.LBs, _ = strconv.Atoi(n)
		} else {
			row.LBs = 1
		}
		row.NsPerLB = row.PierNs / float64(row.LBs)
		rows = append(rows, row)
	}
	return rows, lines
}

// ---- reload

type Dist struct {
	Median float64 `json:"median_ms"`
	P95    float64 `json:"p95_ms"`
	Min    float64 `json:"min_ms"`
	Max    float64 `json:"max_ms"`
}

type ReloadSummary struct {
	Changes        int     `json:"changes"`
	EndToEnd       Dist    `json:"end_to_end"`
	PierCheck      Dist    `json:"pier_check"`
	PierReload     Dist    `json:"pier_reload_confirmed"`
	BareCheck      Dist    `json:"bare_haproxy_check"`
	RatioEndToEnd  float64 `json:"ratio_end_to_end"`
	RatioReload    float64 `json:"ratio_reload"`
	RatioPierCheck float64 `json:"ratio_pier_check"`
	ConfigBytes    int     `json:"config_bytes"`
}

func dist(xs []float64) Dist {
	return Dist{Median: median(xs), P95: percentile(xs, 95), Min: minOf(xs), Max: maxOf(xs)}
}

func reload(raw []byte) (ReloadSummary, error) {
	var in struct {
		Changes []struct {
			EndToEnd float64 `json:"end_to_end_ms"`
			Check    float64 `json:"pier_check_ms"`
			Reload   float64 `json:"pier_reload_ms"`
			Bare     float64 `json:"bare_check_ms"`
		} `json:"changes"`
		ConfigBytes int `json:"config_bytes"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return ReloadSummary{}, err
	}
	var e, c, r, b []float64
	for _, ch := range in.Changes {
		e, c, r, b = append(e, ch.EndToEnd), append(c, ch.Check), append(r, ch.Reload), append(b, ch.Bare)
	}
	s := ReloadSummary{Changes: len(e), EndToEnd: dist(e), PierCheck: dist(c), PierReload: dist(r), BareCheck: dist(b),
		ConfigBytes: in.ConfigBytes}
	if s.BareCheck.Median > 0 {
		s.RatioEndToEnd = s.EndToEnd.Median / s.BareCheck.Median
		s.RatioReload = s.PierReload.Median / s.BareCheck.Median
		s.RatioPierCheck = s.PierCheck.Median / s.BareCheck.Median
	}
	return s, nil
}

// ---- memory

type MemoryRow struct {
	Name        string  `json:"name"`
	Policies    int     `json:"policies"`
	MasterRSS   float64 `json:"master_rss_mib"`
	WorkerRSS   float64 `json:"worker_rss_mib"`
	RSS         float64 `json:"rss_mib"`
	Pss         float64 `json:"pss_mib"`
	Private     float64 `json:"private_mib"`
	RatioRSS    float64 `json:"ratio_rss"`
	RatioPriv   float64 `json:"ratio_private"`
	IsReference bool    `json:"reference"`
}

func memory(raw []byte) ([]MemoryRow, error) {
	var in struct {
		Pairs []struct {
			Name     string `json:"name"`
			Policies int    `json:"policies"`
			Procs    []struct {
				Role string `json:"role"`
				RSS  int    `json:"vm_rss_kib"`
			} `json:"procs"`
			RSS  int `json:"rss_kib"`
			Pss  int `json:"pss_kib"`
			Priv int `json:"private_kib"`
		} `json:"pairs"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	mib := func(k int) float64 { return float64(k) / 1024 }
	var rows []MemoryRow
	var ref *MemoryRow
	for _, p := range in.Pairs {
		row := MemoryRow{Name: p.Name, Policies: p.Policies, RSS: mib(p.RSS), Pss: mib(p.Pss), Private: mib(p.Priv),
			IsReference: p.Name == "reference"}
		for _, pr := range p.Procs {
			if pr.Role == "master" {
				row.MasterRSS = mib(pr.RSS)
			} else {
				row.WorkerRSS += mib(pr.RSS)
			}
		}
		rows = append(rows, row)
	}
	for i := range rows {
		if rows[i].IsReference {
			ref = &rows[i]
		}
	}
	if ref != nil {
		for i := range rows {
			rows[i].RatioRSS, rows[i].RatioPriv = rows[i].RSS/ref.RSS, rows[i].Private/ref.Private
		}
	}
	return rows, nil
}

// ---- assembly

func build(in string) (*Report, error) {
	r := &Report{}
	read := func(name string) ([]byte, error) {
		b, err := os.ReadFile(in + "/" + name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w (did that step of run.sh fail?)", name, err)
		}
		return b, nil
	}
	var err error
	b, err := read("dataplane.json")
	if err != nil {
		return nil, err
	}
	r.Raw.DataPlane = b
	if r.DataPlane, err = dataPlane(b); err != nil {
		return nil, fmt.Errorf("dataplane.json: %w", err)
	}
	var wrk struct {
		Wrk string `json:"wrk"`
	}
	_ = json.Unmarshal(b, &wrk)
	r.Wrk = wrk.Wrk
	if b, err = read("controlplane.txt"); err != nil {
		return nil, err
	}
	r.ControlPlane, r.Raw.ControlPlane = controlPlane(string(b))
	if len(r.ControlPlane) == 0 {
		return nil, fmt.Errorf("controlplane.txt: no benchmark results")
	}
	if b, err = read("reload.json"); err != nil {
		return nil, err
	}
	r.Raw.Reload = b
	if r.Reload, err = reload(b); err != nil {
		return nil, fmt.Errorf("reload.json: %w", err)
	}
	if b, err = read("memory.json"); err != nil {
		return nil, err
	}
	r.Raw.Memory = b
	if r.Memory, err = memory(b); err != nil {
		return nil, fmt.Errorf("memory.json: %w", err)
	}
	if b, err := os.ReadFile(in + "/web.json"); err == nil { // web view: optional
		if r.Web, err = webResult(b); err != nil {
			return nil, fmt.Errorf("web.json: %w", err)
		}
	}
	if b, err := os.ReadFile(in + "/routing.md"); err == nil { // routing: optional
		r.Routing = string(b)
		r.RoutingRaw, _ = os.ReadFile(in + "/routing.json")
	}
	r.Meta = meta(in)
	return r, nil
}

func meta(in string) Meta {
	m := Meta{Date: time.Now().UTC().Format("2006-01-02 15:04 MST"), CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.GitRev = firstLine(command("git", "describe", "--always", "--dirty", "--abbrev=7"))
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.HAProxy, _, _ = strings.Cut(firstLine(command("haproxy", "-v")), " - ")
	m.Wrk, _, _ = strings.Cut(firstLine(command("wrk", "-v")), " Copyright")
	loadFields := func(s string) string {
		f := strings.Fields(s)
		if len(f) >= 3 {
			return strings.Join(f[:3], " ")
		}
		return s
	}
	if b, err := os.ReadFile(in + "/loadavg-start"); err == nil {
		m.LoadStart = loadFields(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadEnd = loadFields(string(b))
	}
	if b, err := os.ReadFile(in + "/start"); err == nil {
		if s, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			m.DurationSec = math.Round(time.Since(time.Unix(s, 0)).Seconds())
		}
	}
	return m
}

func command(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil && len(out) == 0 {
		return "unknown"
	}
	return string(out)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// ---- statistics

// median is the middle value, or the mean of the two middle values.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentile is the nearest-rank percentile: the smallest value with at
// least p% of the values at or below it.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[max(0, min(rank, len(s))-1)]
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = math.Min(m, x)
	}
	return m
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = math.Max(m, x)
	}
	return m
}
