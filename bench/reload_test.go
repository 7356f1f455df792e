package bench

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/test/harness"
)

// reloadChange is one manifest change and what it cost.
type reloadChange struct {
	N int `json:"n"`
	// EndToEndMs: file renamed into place → the new route answers 200 from
	// the backend, polled every 2 ms on a new connection.
	EndToEndMs float64 `json:"end_to_end_ms"`
	// CheckMs and ReloadMs are from pier's log line "haproxy reloaded":
	// check_took (pier's own `haproxy -c` of the staged copy) and
	// reload_took (master CLI reload until `show proc` lists the new
	// worker), both rounded to the millisecond by pier.
	CheckMs  float64 `json:"pier_check_ms"`
	ReloadMs float64 `json:"pier_reload_ms"`
	// BareCheckMs is the reference: `haproxy -c -f haproxy.conf` on the
	// same config, run by the benchmark right after the route answered.
	BareCheckMs float64 `json:"bare_check_ms"`
	Polls       int     `json:"polls"`
}

type reloadResult struct {
	Changes     []reloadChange `json:"changes"`
	ConfigBytes int            `json:"config_bytes"`
	StartedAt   time.Time      `json:"started_at"`
	DurationSec float64        `json:"duration_s"`
	LoadAvg     float64        `json:"load_avg_end"`
}

const (
	reloadNS, reloadHost = "bench", "reload.bench.example"
	reloadService        = "app"
)

// manifestList encodes objects as one v1 List, as `kubectl get -o json`
// writes it.
func manifestList(t *testing.T, objs ...runtime.Object) string {
	t.Helper()
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": objs}, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reloadIngress routes /base and /r<n> of reloadHost to the echo backend.
func reloadIngress(n int) runtime.Object {
	paths := []string{"/base"}
	if n > 0 {
		paths = append(paths, "/r"+strconv.Itoa(n))
	}
	rule := Rule(reloadHost)
	for _, p := range paths {
		rule.HTTP.Paths = append(rule.HTTP.Paths, Prefix(p, reloadService))
	}
	return Ingress(reloadNS, "reload", 0, rule)
}

var tookPattern = regexp.MustCompile(`check_took=([0-9.]+m?s) reload_took=([0-9.]+m?s)`)

// TestReload times 20 route additions through the real `pier run`: from
// writing the Ingress manifest to the new route answering, with pier's own
// check and reload-confirmation times from its log, against a bare
// `haproxy -c` of the same haproxy.conf after each change.
func TestReload(t *testing.T) {
	out := outDir(t)
	requireBinaries(t, "haproxy")
	changes := 20
	if quick() {
		changes = 3
	}
	res := reloadResult{StartedAt: time.Now().UTC()}
	echoPort := harness.StartEcho(t, reloadService, "app-pod")
	manifests, state := harness.ShortTempDir(t), harness.ShortTempDir(t)
	svc, es := Backend(reloadNS, reloadService, int32(echoPort), "127.0.0.1")
	harness.WriteFile(t, filepath.Join(manifests, "00-objects.json"), manifestList(t, IngressClass(), svc, es))
	ingressFile := filepath.Join(manifests, "10-ingress.json")
	harness.WriteFile(t, ingressFile, manifestList(t, reloadIngress(0)))

	p := harness.StartPier(t, harness.Options{Manifests: manifests, State: state})
	vip := p.Addresses(reloadNS, "reload")[0]
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	routed := func(path string) (int, bool) {
		code, reply, _, err := harness.Get(client, vip, p.HTTPPort, reloadHost, path)
		return code, err == nil && code == 200 && reply.Service == reloadService
	}
	harness.WaitFor(t, 10*time.Second, "/base to answer", func() bool { _, ok := routed("/base"); return ok })
	confs, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.conf"))
	if len(confs) != 1 {
		t.Fatalf("want one haproxy.conf, found %v", confs)
	}
	conf := confs[0]

	began := time.Now()
	for n := 1; n <= changes; n++ {
		path := "/r" + strconv.Itoa(n)
		if code, _ := routed(path); code != 404 {
			t.Fatalf("%s answers %d before the change, want 404", path, code)
		}
		logged := len(reloadTimings(t, p.LogPath))
		c := reloadChange{N: n}
		start := time.Now()
		harness.WriteFile(t, ingressFile, manifestList(t, reloadIngress(n)))
		for {
			c.Polls++
			if _, ok := routed(path); ok {
				break
			}
			if time.Since(start) > 30*time.Second {
				t.Fatalf("change %d: %s did not answer within 30s", n, path)
			}
			time.Sleep(2 * time.Millisecond)
		}
		c.EndToEndMs = ms(time.Since(start))

		var timings [][2]time.Duration
		harness.WaitFor(t, 10*time.Second, "pier to log the reload", func() bool {
			timings = reloadTimings(t, p.LogPath)
			return len(timings) > logged
		})
		if len(timings) != logged+1 {
			t.Errorf("change %d: %d reloads logged, want 1", n, len(timings)-logged)
		}
		c.CheckMs, c.ReloadMs = ms(timings[logged][0]), ms(timings[logged][1])

		checkStart := time.Now()
		if outb, err := exec.Command("haproxy", "-c", "-f", conf).CombinedOutput(); err != nil {
			t.Fatalf("haproxy -c %s: %v\n%s", conf, err, outb)
		}
		c.BareCheckMs = ms(time.Since(checkStart))
		t.Logf("change %2d: end to end %6.1f ms (%d polls), pier check %4.0f ms, reload %4.0f ms; bare haproxy -c %5.1f ms",
			n, c.EndToEndMs, c.Polls, c.CheckMs, c.ReloadMs, c.BareCheckMs)
		res.Changes = append(res.Changes, c)
	}
	res.DurationSec = time.Since(began).Seconds()
	if b, err := os.ReadFile(conf); err == nil {
		res.ConfigBytes = len(b)
	}
	res.LoadAvg = loadAvg()
	writeJSON(t, out, "reload.json", res)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reloadTimings returns check_took and reload_took of every reload pier
// logged so far, in order.
func reloadTimings(t *testing.T, logPath string) [][2]time.Duration {
	t.Helper()
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var out [][2]time.Duration
	for _, m := range tookPattern.FindAllStringSubmatch(string(b), -1) {
		c, err1 := time.ParseDuration(m[1])
		r, err2 := time.ParseDuration(m[2])
		if err1 != nil || err2 != nil {
			t.Fatalf("bad timing in pier's log: %q", m[0])
		}
		out = append(out, [2]time.Duration{c, r})
	}
	return out
}
