// Package harness runs `pier run` as a user would — the real binary, real
// HAProxy, real sockets, manifests in files — for the end-to-end, bad-input
// and fault suites under test/. Every helper takes a testing.TB and cleans
// up what it started.
package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/echo"
	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/testport"
)

// PierBin is the pier binary under test: $PIER_BIN, or one built once for
// this test binary.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// NeedLab returns $PIER_BIN for a test that builds a lab network
// (internal/lab) and runs tools inside it. When something is missing it
// skips the test, or fails it under CI (CI set): suite names the test in
// the message.
func NeedLab(t testing.TB, suite string, tools ...string) string {
	t.Helper()
	bin := os.Getenv("PIER_BIN")
	missing := ""
	if bin == "" {
		missing = "PIER_BIN (hack/build.sh builds bin/pier)"
	} else if err := lab.Available(); err != nil {
		missing = err.Error()
	}
	for _, tool := range tools {
		if _, err := osexec.LookPath(tool); err != nil && missing == "" {
			missing = tool + " (hack/deps.sh installs it)"
		}
	}
	if missing == "" {
		return bin
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s needs %s", suite, missing)
	}
	t.Skipf("%s needs %s", suite, missing)
	return ""
}

func PierBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PIER_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "pier-e2e-bin")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "pier")
		out, err := osexec.Command("go", "build", "-o", builtBin, "pier.dev/pier/cmd/pier").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func FreePort(t testing.TB) int {
	t.Helper()
	return testport.Get(t)
}

// ShortTempDir is a temp folder with a short path: HAProxy's sockets live
// below the state dir and a Unix socket path must fit in 107 bytes.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pe2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// StartEcho runs an echo backend on a free loopback port and returns it.
func StartEcho(t testing.TB, service, pod string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		cfg := echo.Config{Namespace: "demo", Service: service, Pod: pod}
		_ = echo.Serve(ctx, l, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l.Addr().(*net.TCPAddr).Port
}

// Pier is one `pier run` under test.
type Pier struct {
	t         testing.TB
	cmd       *osexec.Cmd
	API       string // host:port of pier's HTTP API
	HTTPPort  int
	HTTPSPort int
	LogPath   string
	done      chan struct{}
}

type Options struct {
	Manifests, State string
	API              string // default: a free loopback port
	HTTPPort         int    // default: free ports
	HTTPSPort        int
	ExtraArgs        []string
	// Env is added to the test's environment for pier (later entries win),
	// e.g. an empty TMPDIR and HOME to check pier writes nothing there.
	Env []string
}

func StartPier(t testing.TB, o Options) *Pier {
	t.Helper()
	if o.API == "" {
		o.API = "127.0.0.1:" + strconv.Itoa(FreePort(t))
	}
	if o.HTTPPort == 0 {
		o.HTTPPort, o.HTTPSPort = FreePort(t), FreePort(t)
	}
	p := &Pier{t: t, API: o.API, HTTPPort: o.HTTPPort, HTTPSPort: o.HTTPSPort,
		LogPath: filepath.Join(o.State, fmt.Sprintf("pier-%d.log", time.Now().UnixNano())), done: make(chan struct{})}
	logFile, err := os.Create(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = osexec.Command(PierBin(t), "run", "-f", o.Manifests, "--state-dir", o.State,
		"--api-addr", o.API, "--http-port", strconv.Itoa(o.HTTPPort), "--https-port", strconv.Itoa(o.HTTPSPort),
		"--hard-stop-after", "5s", "--log-level", "debug")
	p.cmd.Args = append(p.cmd.Args, o.ExtraArgs...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if len(o.Env) > 0 {
		p.cmd.Env = append(os.Environ(), o.Env...)
	}
	p.cmd.SysProcAttr = pierProcAttr()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.LogPath)
			t.Logf("pier log (%s):\n%s", p.LogPath, tail(string(b), 60))
		}
	})
	p.waitHealthy()
	return p
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Pid is the pier process's id.
func (p *Pier) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits: pier stops HAProxy gracefully itself.
func (p *Pier) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.t.Errorf("pier did not stop within 30s of SIGTERM")
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to pier alone and waits for it to exit: a crash.
// HAProxy runs in its own process group and keeps serving; the next
// StartPier on the same state dir adopts it.
func (p *Pier) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

func (p *Pier) waitHealthy() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + p.API + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("pier exited during start-up")
		case <-time.After(100 * time.Millisecond):
		}
	}
	p.t.Fatalf("pier not healthy after 20s")
}

// Ingress fetches GET /ingresses/ns/name.
func (p *Pier) Ingress(ns, name string) (*api.IngressResponse, error) {
	resp, err := http.Get("http://" + p.API + "/ingresses/" + ns + "/" + name)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("status %s", resp.Status)
	}
	var out api.IngressResponse
	return &out, json.NewDecoder(resp.Body).Decode(&out)
}

// GatewayLB is the load balancer whose source is the Gateway ns/name, as
// GET /loadbalancers lists it; nil when there is none (yet) or the API
// did not answer.
func (p *Pier) GatewayLB(ns, name string) *model.LoadBalancer {
	resp, err := http.Get("http://" + p.API + "/loadbalancers")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var list struct {
		Items []*model.LoadBalancer `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil
	}
	for _, lb := range list.Items {
		for _, s := range lb.Sources {
			if s.Kind == model.KindGateway && s.Namespace == ns && s.Name == name {
				return lb
			}
		}
	}
	return nil
}

// ServingGateway waits until the Gateway ns/name's load balancer serves
// (ACTIVE, with its VIP and FIP, every node's HAProxy seeing each of its
// members up) and returns it: what a test that sends traffic needs first.
func (p *Pier) ServingGateway(ns, name string) *model.LoadBalancer {
	p.t.Helper()
	var lb *model.LoadBalancer
	WaitFor(p.t, 20*time.Second, "the load balancer of Gateway "+ns+"/"+name+" serves", func() bool {
		lb = p.GatewayLB(ns, name)
		if lb == nil || lb.VIP == "" || lb.FIP == "" || lb.Status.State != model.StateActive {
			return false
		}
		for _, n := range lb.Status.Nodes {
			if n.MembersUp != n.Members {
				return false
			}
		}
		return true
	})
	return lb
}

// Addresses waits until the Ingress publishes addresses and returns them.
func (p *Pier) Addresses(ns, name string) []string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ing, err := p.Ingress(ns, name); err == nil && ing.Ingress != nil && len(ing.Status.LoadBalancer.Ingress) > 0 {
			var out []string
			for _, a := range ing.Status.LoadBalancer.Ingress {
				out = append(out, a.IP)
			}
			return out
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.t.Fatalf("Ingress %s/%s got no address within 20s", ns, name)
	return nil
}

// Metric returns the sum of a Prometheus counter's samples whose line
// contains every filter.
func (p *Pier) Metric(name string, filters ...string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.API + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return SumMetric(string(body), name, filters...)
}

// SumMetric adds the samples of metric name in a scrape (Prometheus's
// text format) whose line contains every filter (e.g. `result="ok"`).
func SumMetric(scrape, name string, filters ...string) float64 {
	var sum float64
lines:
	for line := range strings.SplitSeq(scrape, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		for _, f := range filters {
			if !strings.Contains(line, f) {
				continue lines
			}
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// EchoReply is the part of pier echo's answer the tests read.
type EchoReply struct {
	Service string `json:"service"`
	Pod     string `json:"pod"`
	Host    string `json:"host"`
	Path    string `json:"path"`
}

// Get sends one GET to addr:port with a Host header and returns the
// status code and, for a 200, the echo reply.
func Get(client *http.Client, addr string, port int, host, path string) (int, EchoReply, http.Header, error) {
	return Send(client, http.MethodGet, addr, port, host, path)
}

// Send is Get with a method. Load tests use POST: Go's transport silently
// retries a failed GET on a reused connection, which would hide exactly
// the errors a reload test looks for.
func Send(client *http.Client, method, addr string, port int, host, path string) (int, EchoReply, http.Header, error) {
	req, err := http.NewRequest(method, "http://"+net.JoinHostPort(addr, strconv.Itoa(port))+path, nil)
	if err != nil {
		return 0, EchoReply{}, nil, err
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return 0, EchoReply{}, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, EchoReply{}, nil, err
	}
	var r EchoReply
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, &r); err != nil {
			return resp.StatusCode, r, resp.Header, fmt.Errorf("decode %q: %w", body, err)
		}
	}
	return resp.StatusCode, r, resp.Header, nil
}

func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// Exec runs a command and returns its combined output.
func Exec(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// WaitFor polls cond every 50 ms until it holds, or fails the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}
