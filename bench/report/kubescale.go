package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// kubeRun is one run of bench/kubescale_test.go's kube-scale.json (the
// fields the report reads).
type kubeRun struct {
	Ingresses    int     `json:"ingresses"`
	Nodes        int     `json:"nodes"`
	HAProxyNodes int     `json:"haproxy_nodes"`
	APIRate      string  `json:"api_rate"`
	SetupSec     float64 `json:"setup_s"`
	Cold         struct {
		StoredSec   float64        `json:"all_stored_s"`
		ServedSec   float64        `json:"all_served_both_nodes_s"`
		StatusesSec float64        `json:"all_statuses_s"`
		SettledSec  float64        `json:"settled_s"`
		Complete    bool           `json:"complete"`
		Statuses    int            `json:"statuses"`
		LimitSec    float64        `json:"limit_s"`
		API         kubePhase      `json:"api"`
		Placements  map[string]int `json:"active_per_node"`
		CPU         kubeCPU        `json:"cpu"`
	} `json:"cold_start"`
	RestCPU  kubeCPU     `json:"at_rest_cpu"`
	Baseline kubePhase   `json:"baseline"`
	Rest     kubePhase   `json:"at_rest"`
	Endpoint *kubeSeries `json:"endpoint"`
	New      *kubeSeries `json:"new_ingress"`
	Memory   struct {
		ControllerLeaderRSS  float64 `json:"controller_leader_rss_mib"`
		ControllerLeaderPeak float64 `json:"controller_leader_peak_rss_mib"`
		ControllerStandbyRSS float64 `json:"controller_standby_rss_mib"`
		AgentMaxRSS          float64 `json:"agent_max_rss_mib"`
		AgentMeanRSS         float64 `json:"agent_mean_rss_mib"`
		AgentPeakRSS         float64 `json:"agent_peak_rss_mib"`
		IdleAgentRSS         float64 `json:"idle_agent_mean_rss_mib"`
		HAProxyPerNode       float64 `json:"haproxy_per_node_rss_mib"`
		APIServerRSS         float64 `json:"kube_apiserver_rss_mib"`
		APIServerPeak        float64 `json:"kube_apiserver_peak_rss_mib"`
		EtcdRSS              float64 `json:"etcd_rss_mib"`
	} `json:"memory"`
	Storage struct {
		Objects       int     `json:"load_balancers"`
		JSONBytes     float64 `json:"json_bytes"`
		MeanBytes     float64 `json:"mean_bytes"`
		StatusBytes   float64 `json:"status_bytes"`
		ManagedFields float64 `json:"managed_fields_bytes"`
		EtcdDBBytes   float64 `json:"etcd_db_bytes"`
	} `json:"storage"`
	LoadStart float64 `json:"load_avg_start"`
	LoadEnd   float64 `json:"load_avg_end"`
	Summary   string  `json:"summary"`
}

type kubeCPU struct {
	ControllerLeader float64 `json:"controller_leader_s"`
	AgentMean        float64 `json:"agent_mean_s"`
	AgentMax         float64 `json:"agent_max_s"`
	IdleAgentMean    float64 `json:"idle_agent_mean_s"`
	APIServer        float64 `json:"kube_apiserver_s"`
	Etcd             float64 `json:"etcd_s"`
	Benchmark        float64 `json:"benchmark_s"`
	Sec              float64 `json:"duration_s"`
}

type kubePhase struct {
	DurationSec float64 `json:"duration_s"`
	Changes     int     `json:"changes"`
	Requests    []struct {
		Verb      string  `json:"verb"`
		Resource  string  `json:"resource"`
		Count     float64 `json:"count"`
		PerSec    float64 `json:"per_s"`
		PerChange float64 `json:"per_change"`
	} `json:"requests"`
	Reads               float64 `json:"reads"`
	Writes              float64 `json:"writes"`
	Conflicts           float64 `json:"conflicts_409"`
	WritesPerSec        float64 `json:"writes_per_s"`
	ReadsPerSec         float64 `json:"reads_per_s"`
	WritesPerSecPerNode float64 `json:"writes_per_s_per_node"`
	WritesPerChange     float64 `json:"writes_per_change"`
	ReadsPerChange      float64 `json:"reads_per_change"`
}

type kubeSeries struct {
	Samples    []json.RawMessage `json:"samples"`
	ServedP50  float64           `json:"served_p50_ms"`
	ServedP99  float64           `json:"served_p99_ms"`
	SettledP50 float64           `json:"settled_p50_ms"`
	SettledP99 float64           `json:"settled_p99_ms"`
	StatusP50  float64           `json:"status_p50_ms"`
	StatusP99  float64           `json:"status_p99_ms"`
	StoredP50  float64           `json:"stored_p50_ms"`
	API        kubePhase         `json:"api"`
}

func readKube(path string) ([]kubeRun, []byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var runs []kubeRun
	if err := json.Unmarshal(b, &runs); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return runs, b, nil
}

// kubeReport writes OUT.md and OUT.json from a kube-scale.json.
func kubeReport(path, out string) error {
	runs, raw, err := readKube(path)
	if err != nil {
		return err
	}
	m := meta(filepath.Dir(path))
	took := fmt.Sprintf("load average %s at the start, %s at the end. The run took %.0f s.", m.LoadStart, m.LoadEnd, m.DurationSec)
	if m.DurationSec == 0 { // not from bench/run.sh: runs of TestKubeScale put together
		took = "each run's load average at its start and end is in the table."
	}
	md := fmt.Sprintf("# pier's Kubernetes mode at scale, %s, %s\n\nMachine: %s, %d CPUs, Linux %s; %s; %s; %s docs/benchmarks.md section 11 explains the figures and what runs.\n\n",
		m.Date, m.GitRev, m.CPU, m.CPUs, m.Kernel, m.Go, m.HAProxy, took) + kubeMarkdown(runs)
	js, err := json.MarshalIndent(struct {
		Meta      Meta            `json:"meta"`
		KubeScale json.RawMessage `json:"kube_scale"`
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
	return nil
}

func kubeMarkdown(runs []kubeRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("| Ingresses | nodes (HAProxy) | API rate | every status | all served on both nodes | settled | endpoint → served at the holder p50 / p99 | → settled p50 / p99 | new Ingress → first 200 p50 / p99 | → status p50 / p99 | at rest, writes/s per node | controller RSS (peak) | agent RSS max | load |\n")
	p("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range runs {
		status := fmt.Sprintf("**%.1f s**", r.Cold.StatusesSec)
		if !r.Cold.Complete {
			status = fmt.Sprintf("**%s of %s in %.0f s**", thousands(float64(r.Cold.Statuses)), thousands(float64(r.Ingresses)), r.Cold.LimitSec)
		}
		ep, epSettled, nw, nwStatus := "–", "–", "–", "–"
		if s := r.Endpoint; s != nil {
			ep = fmt.Sprintf("%.0f / **%.0f ms**", s.ServedP50, s.ServedP99)
			epSettled = fmt.Sprintf("%.0f / %.0f ms", s.SettledP50, s.SettledP99)
		}
		if s := r.New; s != nil {
			nw = fmt.Sprintf("%.0f / **%.0f ms**", s.ServedP50, s.ServedP99)
			nwStatus = fmt.Sprintf("%.0f / %.0f ms", s.StatusP50, s.StatusP99)
		}
		p("| %s | %d (%d) | %s | %s | %.1f s | %.1f s | %s | %s | %s | %s | **%.2f** | **%.0f MiB** (%.0f) | %.0f MiB | %.1f → %.1f |\n",
			thousands(float64(r.Ingresses)), r.Nodes, r.HAProxyNodes, r.APIRate, status, r.Cold.ServedSec, r.Cold.SettledSec,
			ep, epSettled, nw, nwStatus, r.Rest.WritesPerSecPerNode, r.Memory.ControllerLeaderRSS, r.Memory.ControllerLeaderPeak,
			r.Memory.AgentMaxRSS, r.LoadStart, r.LoadEnd)
	}
	p("\nTimes from the first pier process started (cold start: the objects exist, nothing of pier runs), from the EndpointSlice patch (endpoint change) and from the Ingress's creation (new Ingress). Served at the holder: a request through the active node's own HAProxy, from inside that node. Settled: the benchmark's watch sees the LoadBalancer reported by both its nodes at the new spec (the change's last API write). p99 is the nearest rank: below 100 samples, the largest.\n")

	p("\n### API requests\n\nThe API server's own count (`apiserver_request_total`, by verb and resource, every response code), less the benchmark's requests; at rest, less the API server's background measured before pier started; per change, less that background and pier's own at rest (the Leases), so that a change counts its own requests only (results before 2026-12-02 03:30 UTC count the Leases renewed meanwhile in the changes). Writes are POST, PUT, PATCH, APPLY and DELETE.\n\n")
	p("| Ingresses | nodes | API rate | phase | writes | reads | 409 conflicts | by verb and resource |\n|---:|---:|---|---|---:|---:|---:|---|\n")
	for _, r := range runs {
		row := func(name string, ph kubePhase, unit string) {
			var parts []string
			for i, q := range ph.Requests {
				if i == 10 {
					parts = append(parts, "…")
					break
				}
				v := q.Count
				switch unit {
				case "/s":
					v = q.PerSec
				case "/change":
					v = q.PerChange
				}
				parts = append(parts, fmt.Sprintf("%s %s %s", q.Verb, q.Resource, short(v)))
			}
			writes, reads, conflicts := ph.Writes, ph.Reads, ph.Conflicts
			switch unit {
			case "/s":
				writes, reads, conflicts = ph.WritesPerSec, ph.ReadsPerSec, ph.Conflicts/ph.DurationSec
			case "/change":
				writes, reads, conflicts = ph.WritesPerChange, ph.ReadsPerChange, ph.Conflicts/float64(max(ph.Changes, 1))
			}
			p("| %s | %d | %s | %s | %s%s | %s%s | %s | %s |\n", thousands(float64(r.Ingresses)), r.Nodes, r.APIRate, name,
				short(writes), unit, short(reads), unit, short(conflicts), strings.Join(parts, ", "))
		}
		row(fmt.Sprintf("cold start (%.0f s)", r.Cold.API.DurationSec), r.Cold.API, "")
		row(fmt.Sprintf("at rest (%.0f s)", r.Rest.DurationSec), r.Rest, "/s")
		if r.Endpoint != nil {
			row(fmt.Sprintf("endpoint change (%d)", r.Endpoint.API.Changes), r.Endpoint.API, "/change")
		}
		if r.New != nil {
			row(fmt.Sprintf("new Ingress (%d)", r.New.API.Changes), r.New.API, "/change")
		}
	}

	p("\n### Memory and storage\n\n")
	p("| Ingresses | nodes | controller leader / standby | agent mean / max / peak | idle agent | HAProxy per node | kube-apiserver (peak) | etcd | LoadBalancer objects | mean object | of it status / managedFields | etcd database |\n")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		m, s := r.Memory, r.Storage
		idle := "–"
		if m.IdleAgentRSS > 0 {
			idle = fmt.Sprintf("%.0f MiB", m.IdleAgentRSS)
		}
		statusShare, mfShare := 0.0, 0.0
		if s.JSONBytes > 0 {
			statusShare, mfShare = 100*s.StatusBytes/s.JSONBytes, 100*s.ManagedFields/s.JSONBytes
		}
		p("| %s | %d | %.0f / %.0f MiB | %.0f / %.0f / %.0f MiB | %s | %.0f MiB | %.0f (%.0f) MiB | %.0f MiB | %s, %s | %s | %.0f %% / %.0f %% | %s |\n",
			thousands(float64(r.Ingresses)), r.Nodes, m.ControllerLeaderRSS, m.ControllerStandbyRSS, m.AgentMeanRSS, m.AgentMaxRSS, m.AgentPeakRSS,
			idle, m.HAProxyPerNode, m.APIServerRSS, m.APIServerPeak, m.EtcdRSS, thousands(float64(s.Objects)), bytesIEC(s.JSONBytes),
			bytesIEC(s.MeanBytes), statusShare, mfShare, bytesIEC(s.EtcdDBBytes))
	}
	p("\nRSS is VmRSS (peak: VmHWM) from /proc; HAProxy per node sums the RSS of a node's HAProxy processes (shared pages counted in each). Object sizes are the JSON the API server serves for a list, the form etcd keeps a custom resource in; the etcd database is `apiserver_storage_size_bytes`, everything the run wrote (Ingresses, Services, EndpointSlices, Events, history not yet compacted).\n")

	p("\n### CPU\n\nCPU time (user + system) over the cold start, and per second at rest. Every process shares this machine's CPUs: in a cluster each node's agent and HAProxy have the node's own, and the cold start here is slower by the time they wait for one another.\n\n")
	p("| Ingresses | nodes | phase | controller leader | agent + its HAProxy, mean / max | idle agent | kube-apiserver | etcd | benchmark |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range runs {
		cpuRow := func(name string, c kubeCPU, per float64, unit string) {
			idle := "–"
			if c.IdleAgentMean > 0 {
				idle = fmt.Sprintf("%.2f %s", c.IdleAgentMean/per, unit)
			}
			p("| %s | %d | %s | %.2f %s | %.2f / %.2f %s | %s | %.2f %s | %.2f %s | %.2f %s |\n", thousands(float64(r.Ingresses)), r.Nodes, name,
				c.ControllerLeader/per, unit, c.AgentMean/per, c.AgentMax/per, unit, idle, c.APIServer/per, unit, c.Etcd/per, unit, c.Benchmark/per, unit)
		}
		cpuRow(fmt.Sprintf("cold start (%.0f s)", r.Cold.CPU.Sec), r.Cold.CPU, 1, "s")
		if r.RestCPU.Sec > 0 {
			cpuRow("at rest", r.RestCPU, r.RestCPU.Sec, "s/s")
		}
	}

	b.WriteString("\n" + kubeTargets(runs))
	p("\n```\n")
	for _, r := range runs {
		p("%s\n", r.Summary)
	}
	p("```\n")
	return b.String()
}

// kubeTargets compares the largest run at 10 nodes or fewer with the
// default rate (the targets are for 3,000 Ingresses on 10 nodes) to the
// targets.
func kubeTargets(runs []kubeRun) string {
	var pick *kubeRun
	for i := range runs {
		r := &runs[i]
		if r.APIRate != "default" || r.Nodes > 10 {
			continue
		}
		if pick == nil || r.Ingresses > pick.Ingresses {
			pick = r
		}
	}
	if pick == nil {
		return ""
	}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	p("### Targets, at %s Ingresses and %d nodes\n\n| target | measured | |\n|---|---:|---|\n", thousands(float64(pick.Ingresses)), pick.Nodes)
	verdict := func(v, limit float64, ok bool) string {
		if !ok {
			return "not measured"
		}
		if v <= limit {
			return "met"
		}
		return fmt.Sprintf("missed by %.0f %%", 100*(v-limit)/limit)
	}
	if status := pick.Cold.StatusesSec; pick.Cold.Complete {
		p("| every status written ≤ 30 s from cold start | %.1f s | %s |\n", status, verdict(status, 30, true))
	} else {
		p("| every status written ≤ 30 s from cold start | %s of %s in %.0f s | missed by more than %.0f %% |\n",
			thousands(float64(pick.Cold.Statuses)), thousands(float64(pick.Ingresses)), pick.Cold.LimitSec, 100*(pick.Cold.LimitSec-30)/30)
	}
	if s := pick.Endpoint; s != nil {
		p("| endpoint change served at the holder, p99 ≤ 30 ms | %.0f ms | %s |\n", s.ServedP99, verdict(s.ServedP99, 30, true))
	}
	if s := pick.New; s != nil {
		p("| new Ingress first 200, p99 ≤ 150 ms | %.0f ms | %s |\n", s.ServedP99, verdict(s.ServedP99, 150, true))
	}
	p("| at rest ≤ 1 API write/s per node | %.2f | %s |\n", pick.Rest.WritesPerSecPerNode, verdict(pick.Rest.WritesPerSecPerNode, 1, true))
	p("| controller ≤ 500 MiB | %.0f MiB (peak %.0f) | %s |\n", pick.Memory.ControllerLeaderRSS, pick.Memory.ControllerLeaderPeak,
		verdict(pick.Memory.ControllerLeaderPeak, 500, true))
	return b.String()
}

// short formats a count or rate with few digits.
func short(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return thousands(v)
	case v >= 10:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
