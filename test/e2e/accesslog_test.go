package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/haproxy/accesslog"
	"pier.dev/pier/test/harness"
)

// accessLogManifests: Ingress shop (web, pod web-pod) logs every request;
// Ingress blog (api, pod api-pod) asks for one line in five.
func accessLogManifests(t *testing.T, dir string) {
	t.Helper()
	web, api := harness.StartEcho(t, "web", "web-pod"), harness.StartEcho(t, "api", "api-pod")
	svc := func(name string, port int) string {
		return `
apiVersion: v1
kind: Service
metadata: {name: ` + name + `, namespace: team}
spec:
  ports: [{name: http, port: 80, targetPort: ` + strconv.Itoa(port) + `}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `-a
  namespace: team
  labels: {kubernetes.io/service-name: ` + name + `}
addressType: IPv4
ports: [{name: http, port: ` + strconv.Itoa(port) + `}]
endpoints:
  - addresses: ["127.0.0.1"]
    conditions: {ready: true}
    targetRef: {kind: Pod, name: ` + name + `-pod}
`
	}
	ing := func(name, host, service, annotations string) string {
		return `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  namespace: team
  annotations: {` + annotations + `}
spec:
  ingressClassName: pier
  rules:
    - host: ` + host + `
      http:
        paths:
          - path: /
            pathType: Prefix
            backend: {service: {name: ` + service + `, port: {number: 80}}}
`
	}
	harness.WriteFile(t, filepath.Join(dir, "class.yaml"), `
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: pier}
spec: {controller: pier.dev/ingress-controller}
`)
	harness.WriteFile(t, filepath.Join(dir, "apps.yaml"), svc("web", web)+"---"+svc("api", api)+"---"+
		ing("shop", "shop.example", "web", "")+"---"+ing("blog", "blog.example", "api", `pier.dev/access-log: "sample=5"`))
}

// accessLogs reads the lines written to path after offset.
func accessLogs(t *testing.T, path string, offset int) []accesslog.Line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if offset > len(b) {
		offset = len(b)
	}
	// Only whole lines: the agent's buffer may be flushed mid-line.
	b = b[offset:]
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []accesslog.Line
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l accesslog.Line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("access-log line is not JSON: %v\n%s", err, sc.Text())
		}
		out = append(out, l)
	}
	return out
}

func fileSize(path string) int {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return int(st.Size())
}

// TestAccessLogAndMetrics: N requests through pier run give N lines in
// --access-log-file, each naming the Ingress, Service and pod that
// answered, and pier_ingress_requests_total counts them all; blog's
// sample=5 writes one line in five and still counts every request.
func TestAccessLogAndMetrics(t *testing.T) {
	harness.PierBin(t)
	dir, state := t.TempDir(), harness.ShortTempDir(t)
	accessLogManifests(t, dir)
	logPath := filepath.Join(state, "access.log")
	p := harness.StartPier(t, harness.Options{Manifests: dir, State: state, ExtraArgs: []string{"--access-log-file", logPath}})
	addr, blog := p.Addresses("team", "shop")[0], p.Addresses("team", "blog")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	// A new load balancer may first be served by the landing process,
	// which does not log: wait until its shard serves both.
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := harness.Exec("sh", "-c", "ls -laR "+state+" | head -40; curl -s http://"+p.API+"/metrics | grep -E '^pier_(ingress_requests|access)'; head -c 2000 "+logPath)
			t.Log(out)
		}
	})
	for host, at := range map[string]string{"shop.example": addr, "blog.example": blog} {
		harness.WaitFor(t, 20*time.Second, "a logged request to "+host, func() bool {
			harness.Get(client, at, p.HTTPPort, host, "/warm-up")
			return p.Metric("pier_ingress_requests_total", `ingress="`+strings.TrimSuffix(host, ".example")+`"`, `status="2xx"`) > 0
		})
	}
	time.Sleep(2 * accesslog.FlushEvery)
	offset := fileSize(logPath)
	before := map[string]float64{}
	for _, ing := range []string{"shop", "blog"} {
		before[ing] = p.Metric("pier_ingress_requests_total", `ingress="`+ing+`"`)
	}

	const n = 200
	for i := range n {
		path := "/item/" + strconv.Itoa(i)
		if code, reply, _, err := harness.Get(client, addr, p.HTTPPort, "shop.example", path); err != nil || code != 200 || reply.Pod != "web-pod" {
			t.Fatalf("shop %s: %d %+v %v", path, code, reply, err)
		}
		if i%2 == 0 {
			if code, _, _, err := harness.Get(client, blog, p.HTTPPort, "blog.example", path); err != nil || code != 200 {
				t.Fatalf("blog %s: %d %v", path, code, err)
			}
		}
	}
	var lines []accesslog.Line
	harness.WaitFor(t, 5*time.Second, "the access-log lines", func() bool {
		lines = accessLogs(t, logPath, offset)
		return len(lines) >= n+n/2/5
	})
	time.Sleep(2 * accesslog.FlushEvery)
	lines = accessLogs(t, logPath, offset)
	byIngress := map[string][]accesslog.Line{}
	for _, l := range lines {
		byIngress[l.Ingress] = append(byIngress[l.Ingress], l)
	}
	if got := len(byIngress["shop"]); got != n {
		t.Errorf("%d lines for shop, want %d", got, n)
	}
	if got := len(byIngress["blog"]); got != n/2/5 {
		t.Errorf("%d lines for blog (sample=5 of %d), want %d", got, n/2, n/2/5)
	}
	if len(byIngress) != 2 {
		t.Errorf("lines for %d Ingresses, want 2", len(byIngress))
	}
	paths := map[string]bool{}
	for _, l := range byIngress["shop"] {
		paths[l.Path] = true
		if l.Namespace != "team" || l.Service != "web" || l.Pod != "web-pod" || l.Host != "shop.example" ||
			l.Status != 200 || l.Method != "GET" || l.LoadBalancer != "team/shop" || !strings.HasPrefix(l.Member, "127.0.0.1:") ||
			l.RequestID == "" || l.DurationMS < 0 || l.BytesSent <= 0 || l.TerminationState != "----" || l.Time == "" {
			t.Fatalf("shop line: %+v", l)
		}
	}
	if len(paths) != n {
		t.Errorf("%d distinct paths in shop's lines, want %d", len(paths), n)
	}
	for _, l := range byIngress["blog"] {
		if l.Service != "api" || l.Pod != "api-pod" {
			t.Fatalf("blog line: %+v", l)
		}
	}
	for ing, want := range map[string]float64{"shop": n, "blog": n / 2} {
		got := p.Metric("pier_ingress_requests_total", `ingress="`+ing+`"`, `status="2xx"`) - before[ing]
		if got < want*0.99 || got > want*1.01 {
			t.Errorf("pier_ingress_requests_total for %s grew by %v, want %v (±1%%)", ing, got, want)
		}
		if h := p.Metric("pier_ingress_request_duration_seconds_count", `ingress="`+ing+`"`) - before[ing]; h < want*0.99 || h > want*1.01 {
			t.Errorf("request duration histogram for %s counted %v, want %v", ing, h, want)
		}
	}
}

// loadFor sends requests from clients keep-alive connections for d and
// returns how many completed with 200 and their latencies, sorted.
func loadFor(addr string, port int, host string, clients int, d time.Duration) (int, []time.Duration) {
	deadline := time.Now().Add(d)
	results := make(chan []time.Duration, clients)
	for range clients {
		go func() {
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			var lat []time.Duration
			for time.Now().Before(deadline) {
				start := time.Now()
				if code, _, _, err := harness.Get(c, addr, port, host, "/load"); err == nil && code == 200 {
					lat = append(lat, time.Since(start))
				}
			}
			results <- lat
		}()
	}
	var all []time.Duration
	for range clients {
		all = append(all, <-results...)
	}
	slices.Sort(all)
	return len(all), all
}

func quantile(lat []time.Duration, q float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[int(float64(len(lat)-1)*q)]
}

// TestAccessLogReaderStopped: with the agent stopped (SIGSTOP: its
// socket is there, nobody reads it, its queue fills), HAProxy keeps
// serving at the same pace and latency, dropping the lines; once the
// agent runs again it counts the drops.
func TestAccessLogReaderStopped(t *testing.T) {
	harness.PierBin(t)
	if testing.Short() {
		t.Skip("load")
	}
	dir, state := t.TempDir(), harness.ShortTempDir(t)
	accessLogManifests(t, dir)
	logPath := filepath.Join(state, "access.log")
	p := harness.StartPier(t, harness.Options{Manifests: dir, State: state, ExtraArgs: []string{"--access-log-file", logPath}})
	addr := p.Addresses("team", "shop")[0]
	client := &http.Client{Timeout: 5 * time.Second}
	harness.WaitFor(t, 20*time.Second, "a logged request", func() bool {
		harness.Get(client, addr, p.HTTPPort, "shop.example", "/warm-up")
		return p.Metric("pier_ingress_requests_total", `ingress="shop"`, `status="2xx"`) > 0
	})
	const clients, phase = 8, 3 * time.Second
	counted := p.Metric("pier_ingress_requests_total", `ingress="shop"`)
	running, latRunning := loadFor(addr, p.HTTPPort, "shop.example", clients, phase)
	time.Sleep(2 * accesslog.FlushEvery)
	countedRunning := p.Metric("pier_ingress_requests_total", `ingress="shop"`) - counted

	if err := syscall.Kill(p.Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			syscall.Kill(p.Pid(), syscall.SIGCONT)
			resumed = true
		}
	}
	t.Cleanup(resume)
	stopped, latStopped := loadFor(addr, p.HTTPPort, "shop.example", clients, phase)
	resume()

	t.Logf("reader running: %d requests in %v (%.0f/s), p50 %v p99 %v; %d counted (%.2f%% dropped)",
		running, phase, float64(running)/phase.Seconds(), quantile(latRunning, 0.5), quantile(latRunning, 0.99),
		int(countedRunning), 100*(1-countedRunning/float64(running)))
	t.Logf("reader stopped: %d requests in %v (%.0f/s), p50 %v p99 %v",
		stopped, phase, float64(stopped)/phase.Seconds(), quantile(latStopped, 0.5), quantile(latStopped, 0.99))
	if stopped < running*7/10 {
		t.Errorf("with the reader stopped %d requests completed, with it running %d", stopped, running)
	}
	if p50s, p50r := quantile(latStopped, 0.5), quantile(latRunning, 0.5); p50s > p50r*3/2+time.Millisecond {
		t.Errorf("median latency %v with the reader stopped, %v with it running", p50s, p50r)
	}
	if countedRunning < float64(running)*0.99 {
		t.Errorf("reader running: %v of %d requests counted, more than 1%% lost", countedRunning, running)
	}
	// The next member read (every 10 s) counts what HAProxy dropped.
	harness.WaitFor(t, 25*time.Second, "the dropped lines counted", func() bool {
		return p.Metric("pier_access_log_dropped_total") > 0
	})
	if d := p.Metric("pier_access_log_dropped_total"); d > float64(stopped) {
		t.Errorf("%v lines dropped, more than the %d requests sent while stopped", d, stopped)
	}
}
