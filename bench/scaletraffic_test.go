package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// scaleTraffic is one wrk run of the traffic measurement at one size of
// TestScale: requests to one of the Ingresses present, through pier (its
// shard packs about a quarter of them), through a hand-written HAProxy
// config serving that one host, or direct to the backend.
type scaleTraffic struct {
	Round  int    `json:"round"`
	Mode   string `json:"mode"`   // keep-alive or close
	Target string `json:"target"` // pier, reference or direct
	wrkResult
	// CPUPerReqUs is the proxy's CPU time per request: for pier every
	// HAProxy process of the node (the shards' health checks of the other
	// load balancers subtracted, as measured idle just before), for the
	// reference its own process; 0 for direct.
	CPUPerReqUs float64 `json:"cpu_per_req_us"`
	LoadAvg     float64 `json:"load_avg"`
}

const (
	trafficPier      = "pier"
	trafficReference = "reference"
	trafficDirect    = "direct"
)

// trafficSeries measures the data plane with n Ingresses present: wrk
// (2 threads, 50 connections) keep-alive and with Connection: close,
// against the last Ingress present through pier, a hand-written HAProxy
// config doing the same routing for that host alone, and the backend
// directly, interleaved in each of rounds. It shows whether what a request
// costs depends on how many Ingresses the node serves.
func (f *scaleFixture) trafficSeries(t *testing.T, n, rounds int) []scaleTraffic {
	d := 3 * time.Second
	if quick() {
		d = time.Second
	}
	requireBinaries(t, "wrk")
	i := n - 1
	ns, name := fmt.Sprintf("team-%02d", i%50), fmt.Sprintf("app-%05d", i)
	host := name + ".bench.example"
	vip := f.p.Addresses(ns, name)[0]
	pierURL := "http://" + vip + ":" + strconv.Itoa(f.p.HTTPPort) + "/"

	refDir := harness.ShortTempDir(t)
	refPort := harness.FreePort(t)
	refConf := trafficReferenceConfig(host, "127.0.0.1:"+strconv.Itoa(refPort), "127.0.0.1:"+strconv.Itoa(f.appPort))
	refCfg := filepath.Join(refDir, "haproxy.conf")
	if err := os.WriteFile(refCfg, []byte(refConf), 0o600); err != nil {
		t.Fatal(err)
	}
	ref := startHAProxy(t, refDir, refCfg)
	refURL := "http://127.0.0.1:" + strconv.Itoa(refPort) + "/"
	directURL := "http://127.0.0.1:" + strconv.Itoa(f.appPort) + "/"

	pierTicks := func() int64 {
		var sum int64
		for _, pid := range haproxyWorkers(f.state) {
			sum += cpuTicks(pid)
		}
		return sum
	}
	// The shards health-check every member of every load balancer
	// (inter 2s): that background is measured idle and subtracted, so
	// the figure is what the requests cost.
	idle := 2 * time.Second
	before := pierTicks()
	time.Sleep(idle)
	background := float64(pierTicks()-before) / idle.Seconds() // ticks a second

	targets := []struct {
		name, url string
		ticks     func() int64
	}{
		{trafficPier, pierURL, pierTicks},
		{trafficReference, refURL, func() int64 { return cpuTicks(ref.PID()) }},
		{trafficDirect, directURL, nil},
	}
	// Warm-up: connections, HAProxy's pools and the backend.
	for _, tg := range targets {
		runWrk(t, tg.url, host, false, time.Second)
	}
	var runs []scaleTraffic
	for round := 1; round <= rounds; round++ {
		for _, closeConn := range []bool{false, true} {
			mode := "keep-alive"
			if closeConn {
				mode = "close"
			}
			for _, tg := range targets {
				var t0 int64
				if tg.ticks != nil {
					t0 = tg.ticks()
				}
				start := time.Now()
				r := runWrk(t, tg.url, host, closeConn, d)
				run := scaleTraffic{Round: round, Mode: mode, Target: tg.name, wrkResult: r, LoadAvg: loadAvg()}
				if tg.ticks != nil && r.Requests > 0 {
					ticks := float64(tg.ticks() - t0)
					if tg.name == trafficPier {
						ticks = max(ticks-background*time.Since(start).Seconds(), 0)
					}
					run.CPUPerReqUs = ticks * 10 * 1000 / float64(r.Requests) // USER_HZ 100: a tick is 10 ms
				}
				if r.Non2xx > 0 || r.SocketErrors > 0 {
					t.Errorf("%d Ingresses, %s %s: %d non-2xx, %d socket errors", n, tg.name, mode, r.Non2xx, r.SocketErrors)
				}
				runs = append(runs, run)
			}
		}
	}
	for _, r := range runs {
		t.Logf("%d Ingresses, round %d, %s, %s: %.0f req/s, p50 %.2f ms, p99 %.2f ms, %.1f µs CPU/request",
			n, r.Round, r.Mode, r.Target, r.RPS, r.P50ms, r.P99ms, r.CPUPerReqUs)
	}
	return runs
}

// trafficReferenceConfig is the hand-written HAProxy config for the traffic
// measurement: what an operator would write to route host to the
// backend, with pier's global values.
func trafficReferenceConfig(host, bind, backend string) string {
	return `# bench reference: one host to one backend
global
    maxconn 4096
    tune.bufsize 16384
    tune.maxrewrite 1024

` + referenceDefaults + `
frontend fe_ref
    bind ` + bind + `
    use_backend be_app if { req.hdr(host),field(1,:),lower -m str ` + host + ` }

backend be_app
    server s1 ` + backend + `
`
}
