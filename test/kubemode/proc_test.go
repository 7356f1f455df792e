package kubemode

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// proc is one pier process under test, logging to a file.
type proc struct {
	t       testing.TB
	name    string
	role    string // "controller" or "agent"
	api     string // host:port of its HTTP API
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // exit status, valid once done is closed
}

func (e *env) start(name, role, api string, args ...string) *proc {
	e.t.Helper()
	logFile, err := os.CreateTemp("", "pier-kubemode-"+name+"-*.log")
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{t: e.t, name: name, role: role, api: api, logPath: logFile.Name(), done: make(chan struct{})}
	p.cmd = exec.Command(os.Getenv("PIER_BIN"), append([]string{role}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		e.t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// startController runs `pier controller` as ServiceAccount pier-controller
// with the test's pools and Lease, watching the test's namespace only (the
// namespaces of earlier tests terminate in the background); extra flags
// come last and win.
func (e *env) startController(id string, extra ...string) *proc {
	e.t.Helper()
	api := freeAddr(e.t)
	args := []string{
		"--kubeconfig", e.ctlKube, "--api-addr", api, "--identity", id,
		"--internal-pool", e.internal.String(), "--public-pool", e.public.String(),
		"--node-selector", "kubernetes.io/hostname=" + activeNode, "--watch-namespace", e.ns,
		"--lease-namespace", leaseNS, "--lease-name", e.lease,
		"--lease-duration", "4s", "--renew-deadline", "3s", "--retry-period", "1s",
		"--log-level", "debug",
		"--allow-loopback-endpoints", // the echo backends listen on 127.0.0.1
	}
	p := e.start(id, "controller", api, append(args, extra...)...)
	p.waitHTTP("/healthz")
	return p
}

// startAgent runs `pier agent` on node-a as ServiceAccount pier-agent,
// with a fresh state folder (short: HAProxy's socket paths must fit).
func (e *env) startAgent() *proc {
	e.t.Helper()
	state, err := os.MkdirTemp("", "pkm")
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.states = append(e.states, state)
	e.mu.Unlock()
	api := freeAddr(e.t)
	p := e.start("agent-"+activeNode, "agent", api, "--kubeconfig", e.agentKub, "--node", activeNode,
		"--state-dir", state, "--api-addr", api, "--hard-stop-after", "5s", "--log-level", "debug")
	p.waitHTTP("/metrics")
	return p
}

func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// waitHTTP waits until the process answers path on its API with any status.
func (p *proc) waitHTTP(path string) {
	p.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.api + path); err == nil {
			resp.Body.Close()
			return
		}
		if p.exited() {
			p.t.Fatalf("%s exited during start-up: %v\n%s", p.name, p.err, p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("%s: no answer on %s within 20s\n%s", p.name, path, p.tail(30))
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill is a crash: SIGKILL to the process alone.
func (p *proc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// dumpStacks makes a live Go process print its goroutines to its log
// (SIGQUIT) and waits briefly for it to exit: for diagnosing a hang.
func (p *proc) dumpStacks() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
	}
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) error {
	if p.exited() {
		return p.err
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(grace):
		p.t.Errorf("%s did not stop within %s of SIGTERM", p.name, grace)
		p.kill()
		return p.err
	}
}

// count returns how many log lines contain every one of subs.
func (p *proc) count(subs ...string) int {
	f, err := os.Open(p.logPath)
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
lines:
	for sc.Scan() {
		for _, s := range subs {
			if !strings.Contains(sc.Text(), s) {
				continue lines
			}
		}
		n++
	}
	return n
}

func (p *proc) tail(n int) string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// metric sums the samples of a Prometheus metric on the process's API
// whose line contains every filter (e.g. `result="ok"`).
func (p *proc) metric(name string, filters ...string) float64 {
	p.t.Helper()
	resp, err := http.Get("http://" + p.api + "/metrics")
	if err != nil {
		p.t.Fatalf("%s metrics: %v", p.name, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') || !containsAll(line, filters) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// stopHAProxies ends the HAProxy instances an agent left under state: the
// agent leaves them serving on exit, by design.
func stopHAProxies(t testing.TB, state string) {
	pidFiles, _ := filepath.Glob(filepath.Join(state, "haproxy", "*", "haproxy.pid"))
	for _, f := range pidFiles {
		b, _ := os.ReadFile(f)
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 1 {
			continue
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("HAProxy %d (%s) still running 10s after SIGTERM", pid, f)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z"
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
