package e2e

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
)

// pierBin is the pier binary under test: $PIER_BIN, or one built once for
// this test binary.
var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

func pierBin(t *testing.T) string {
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

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// shortTempDir is a temp folder with a short path: HAProxy's sockets live
// below the state dir and a Unix socket path must fit in 107 bytes.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pe2e")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// startEcho runs an echo backend on a free loopback port and returns it.
func startEcho(t *testing.T, service, pod string) int {
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

// pierProc is one `pier run` under test.
type pierProc struct {
	t         *testing.T
	cmd       *osexec.Cmd
	api       string
	httpPort  int
	httpsPort int
	logPath   string
	done      chan struct{}
}

type pierOpts struct {
	manifests, state string
	api              string
	httpPort         int
	httpsPort        int
}

func startPier(t *testing.T, o pierOpts) *pierProc {
	t.Helper()
	if o.api == "" {
		o.api = "127.0.0.1:" + strconv.Itoa(freePort(t))
	}
	if o.httpPort == 0 {
		o.httpPort, o.httpsPort = freePort(t), freePort(t)
	}
	p := &pierProc{t: t, api: o.api, httpPort: o.httpPort, httpsPort: o.httpsPort,
		logPath: filepath.Join(o.state, fmt.Sprintf("pier-%d.log", time.Now().UnixNano())), done: make(chan struct{})}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = osexec.Command(pierBin(t), "run", "-f", o.manifests, "--state-dir", o.state,
		"--api-addr", o.api, "--http-port", strconv.Itoa(o.httpPort), "--https-port", strconv.Itoa(o.httpsPort),
		"--hard-stop-after", "5s", "--log-level", "debug")
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("pier log (%s):\n%s", p.logPath, tail(string(b), 60))
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

// stop sends SIGTERM and waits: pier stops HAProxy gracefully itself.
func (p *pierProc) stop() {
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

func (p *pierProc) waitHealthy() {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + p.api + "/healthz")
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

// ingress fetches GET /ingresses/ns/name.
func (p *pierProc) ingress(ns, name string) (*api.IngressResponse, error) {
	resp, err := http.Get("http://" + p.api + "/ingresses/" + ns + "/" + name)
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

// addresses waits until the Ingress publishes addresses and returns them.
func (p *pierProc) addresses(ns, name string) []string {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if ing, err := p.ingress(ns, name); err == nil && ing.Ingress != nil && len(ing.Status.LoadBalancer.Ingress) > 0 {
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

// metric returns the sum of a Prometheus counter's samples whose line
// contains every filter.
func (p *pierProc) metric(name string, filters ...string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.api + "/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
lines:
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		for _, f := range filters {
			if !strings.Contains(line, f) {
				continue lines
			}
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// echoReply is the part of pier echo's answer the tests read.
type echoReply struct {
	Service string `json:"service"`
	Pod     string `json:"pod"`
	Host    string `json:"host"`
	Path    string `json:"path"`
}

// get sends one GET to addr:port with a Host header and returns the
// status code and, for a 200, the echo reply.
func get(client *http.Client, addr string, port int, host, path string) (int, echoReply, http.Header, error) {
	return send(client, http.MethodGet, addr, port, host, path)
}

// send is get with a method. Load tests use POST: Go's transport silently
// retries a failed GET on a reused connection, which would hide exactly
// the errors a reload test looks for.
func send(client *http.Client, method, addr string, port int, host, path string) (int, echoReply, http.Header, error) {
	req, err := http.NewRequest(method, "http://"+net.JoinHostPort(addr, strconv.Itoa(port))+path, nil)
	if err != nil {
		return 0, echoReply{}, nil, err
	}
	req.Host = host
	resp, err := client.Do(req)
	if err != nil {
		return 0, echoReply{}, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, echoReply{}, nil, err
	}
	var r echoReply
	if resp.StatusCode == 200 {
		if err := json.Unmarshal(body, &r); err != nil {
			return resp.StatusCode, r, resp.Header, fmt.Errorf("decode %q: %w", body, err)
		}
	}
	return resp.StatusCode, r, resp.Header, nil
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp~"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// exec runs a command and returns its combined output.
func exec(name string, args ...string) (string, error) {
	out, err := osexec.Command(name, args...).CombinedOutput()
	return string(out), err
}
