//go:build linux

package kubepair

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/test/harness"
)

// proc is one pier process under test, logging to a file.
type proc struct {
	t       testing.TB
	name    string
	api     string // host:port of its HTTP API
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error // exit status, valid once done is closed
}

// startProc starts argv (argv[0] is looked up in PATH) with its output in
// dir/name.log, in a process group of its own: a ^C to the test reaches
// the test, which stops its children in order.
func startProc(t testing.TB, dir, name, api string, argv ...string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	p := &proc{t: t, name: name, api: api, logPath: logPath, done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { p.err = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitHTTP waits until the process answers path on its API.
func (p *proc) waitHTTP(path string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		if resp, err := client.Get("http://" + p.api + path); err == nil {
			resp.Body.Close()
			return nil
		}
		if p.exited() {
			return fmt.Errorf("%s exited during start-up: %v\n%s", p.name, p.err, p.tail(30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: no answer on %s within %s\n%s", p.name, path, limit, p.tail(30))
}

// kill is a crash: SIGKILL to the process alone (HAProxy and keepalived,
// its children, keep running).
func (p *proc) kill() time.Time {
	at := time.Now()
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
	return at
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.t.Errorf("%s did not stop within %s of SIGTERM", p.name, grace)
		p.kill()
	}
}

// logTime matches the time attribute of slog's text handler.
var logTime = regexp.MustCompile(`^time=(\S+) `)

// lines returns the log lines that contain every one of subs, with their
// times (zero when a line has none).
func (p *proc) lines(subs ...string) (out []string, times []time.Time) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
scan:
	for sc.Scan() {
		line := sc.Text()
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue scan
			}
		}
		var at time.Time
		if m := logTime.FindStringSubmatch(line); m != nil {
			at, _ = time.Parse(time.RFC3339Nano, m[1])
		}
		out, times = append(out, line), append(times, at)
	}
	return out, times
}

func (p *proc) count(subs ...string) int {
	lines, _ := p.lines(subs...)
	return len(lines)
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
func (p *proc) metric(name string, filters ...string) (float64, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + p.api + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("%s metrics: %w", p.name, err)
	}
	return harness.SumMetric(string(body), name, filters...), nil
}

// readPid reads a pid file; 0 when there is none.
func readPid(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
