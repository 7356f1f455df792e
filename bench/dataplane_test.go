package bench

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// dataPlaneRun is one wrk run.
type dataPlaneRun struct {
	Round  int    `json:"round"`
	Mode   string `json:"mode"`   // keep-alive or close
	Config string `json:"config"` // pier or reference
	wrkResult
	LoadAvg float64 `json:"load_avg"`
}

type dataPlaneResult struct {
	Wrk         string         `json:"wrk"`
	Host        string         `json:"host"`
	Path        string         `json:"path"`
	Policies    int            `json:"policies"`
	Pools       int            `json:"pools"`
	PierConfig  string         `json:"pier_config"`
	RefConfig   string         `json:"reference_config"`
	Runs        []dataPlaneRun `json:"runs"`
	StartedAt   time.Time      `json:"started_at"`
	DurationSec float64        `json:"duration_s"`
}

// TestDataPlane compares HAProxy running pier's rendered config for a
// 50-policy load balancer with HAProxy running a minimal hand-written
// config, both in front of the same echo backend, with wrk, alternating
// pier/reference in each of 3 rounds, keep-alive and Connection: close.
func TestDataPlane(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy", "wrk")
	rounds, duration, warmup := 3, 10*time.Second, 2*time.Second
	if quick() {
		rounds, duration, warmup = 1, 2*time.Second, time.Second
	}
	res := dataPlaneResult{Wrk: fmt.Sprintf("wrk -t2 -c50 -d%ds --latency", int(duration.Seconds())),
		Host: DataPlaneHost, Path: DataPlanePath, StartedAt: time.Now().UTC()}

	target := harness.StartEcho(t, DataPlaneTarget, "target-pod")
	decoy := harness.StartEcho(t, "decoy", "decoy-pod")
	root := harness.ShortTempDir(t)
	pierDir, refDir := filepath.Join(root, "pier"), filepath.Join(root, "ref")
	for _, d := range []string{pierDir, refDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	pierPort, refPort := harness.FreePort(t), harness.FreePort(t)
	pierConf, lb, err := DataPlaneConfig(int32(target), int32(decoy), "127.0.0.1", pierPort, pierDir)
	if err != nil {
		t.Fatal(err)
	}
	refConf := ReferenceConfig("127.0.0.1:"+strconv.Itoa(refPort), "127.0.0.1:"+strconv.Itoa(target))
	res.Policies, res.Pools = len(lb.Listeners[0].Policies), len(lb.Pools)
	res.PierConfig, res.RefConfig = string(pierConf), string(refConf)
	pierCfg, refCfg := filepath.Join(pierDir, "haproxy.conf"), filepath.Join(refDir, "haproxy.conf")
	if err := os.WriteFile(pierCfg, pierConf, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(refCfg, refConf, 0o600); err != nil {
		t.Fatal(err)
	}
	startHAProxy(t, pierDir, pierCfg)
	startHAProxy(t, refDir, refCfg)

	// Both answer the measured request from the target backend, and pier's
	// config sends it down the last policy (a decoy would answer otherwise).
	client := &http.Client{Timeout: 5 * time.Second}
	for name, port := range map[string]int{"pier": pierPort, "reference": refPort} {
		code, reply, hdr, err := harness.Get(client, "127.0.0.1", port, DataPlaneHost, "/routed-by-last-policy")
		if err != nil || code != 200 || reply.Service != DataPlaneTarget {
			t.Fatalf("%s: GET /routed-by-last-policy: %d %+v %v, want 200 from %s", name, code, reply, err, DataPlaneTarget)
		}
		if name == "pier" && hdr.Get("Server") != "pier" {
			t.Fatalf("pier: Server header %q, want pier", hdr.Get("Server"))
		}
		if body, err := getBody(client, port, DataPlaneHost, DataPlanePath); err != nil || body != "ok" {
			t.Fatalf("%s: GET %s: %q %v, want ok", name, DataPlanePath, body, err)
		}
	}

	urls := map[string]string{
		"pier":      "http://127.0.0.1:" + strconv.Itoa(pierPort) + DataPlanePath,
		"reference": "http://127.0.0.1:" + strconv.Itoa(refPort) + DataPlanePath,
	}
	for _, c := range []string{"pier", "reference"} {
		runWrk(t, urls[c], DataPlaneHost, false, warmup)
	}
	began := time.Now()
	for round := 1; round <= rounds; round++ {
		for _, mode := range []string{"keep-alive", "close"} {
			for _, c := range []string{"pier", "reference"} {
				r := runWrk(t, urls[c], DataPlaneHost, mode == "close", duration)
				run := dataPlaneRun{Round: round, Mode: mode, Config: c, wrkResult: r, LoadAvg: loadAvg()}
				t.Logf("round %d %-10s %-9s %9.0f req/s  p50 %6.2f ms  p99 %6.2f ms  non-2xx %d  socket errors %d  load %.2f",
					round, mode, c, r.RPS, r.P50ms, r.P99ms, r.Non2xx, r.SocketErrors, run.LoadAvg)
				if r.Non2xx > 0 {
					t.Errorf("%s %s round %d: %d responses were not 2xx", c, mode, round, r.Non2xx)
				}
				res.Runs = append(res.Runs, run)
			}
		}
	}
	res.DurationSec = time.Since(began).Seconds()
	writeJSON(t, out, "dataplane.json", res)
}

// getBody sends GET path with a Host header to 127.0.0.1:port and returns
// the body of a 200.
func getBody(client *http.Client, port int, host, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+path, nil)
	if err != nil {
		return "", err
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != 200 {
		err = fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}
