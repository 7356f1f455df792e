package process

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/testport"
)

// env is one test's world: a Go backend, a rendered config and an instance
// folder, all under a short temporary root (Unix socket paths are limited).
type env struct {
	t       *testing.T
	root    string
	lbDir   string // where the "agent" renders haproxy.conf and the stats socket lives
	cfgPath string
	port    int
	backend *httptest.Server
	slow    chan struct{} // receives when a /slow request reached the backend
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("haproxy not installed")
	}
	root, err := os.MkdirTemp("", "pier-proc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(root) })
	e := &env{t: t, root: root, lbDir: filepath.Join(root, "lb"), port: freePort(t), slow: make(chan struct{}, 1)}
	e.cfgPath = filepath.Join(e.lbDir, "haproxy.conf")
	if err := os.Mkdir(e.lbDir, 0o700); err != nil {
		t.Fatal(err)
	}
	e.backend = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			e.slow <- struct{}{}
			time.Sleep(1500 * time.Millisecond)
			_, _ = io.WriteString(w, "slow done")
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(e.backend.Close)
	return e
}

func freePort(t *testing.T) int {
	t.Helper()
	return testport.Get(t)
}

func (e *env) statsSock() string { return filepath.Join(e.lbDir, "haproxy.sock") }
func (e *env) url(path string) string {
	return fmt.Sprintf("http://127.0.0.1:%d%s", e.port, path)
}

// config renders a valid configuration whose responses carry X-Config: name.
// extra is appended to the frontend.
func (e *env) config(name, extra string) string {
	return fmt.Sprintf(`global
    stats socket %s mode 600 level admin expose-fd listeners
    hard-stop-after 10s

defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
    timeout http-keep-alive 2s
    option idle-close-on-response

frontend fe
    bind 127.0.0.1:%d
    http-response set-header X-Config %s
    default_backend be
%s
backend be
    server s1 %s
`, e.statsSock(), e.port, name, extra, e.backend.Listener.Addr())
}

// write replaces the rendered file atomically, as the agent does.
func (e *env) write(content string) {
	e.t.Helper()
	tmp := e.cfgPath + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.cfgPath); err != nil {
		e.t.Fatal(err)
	}
}

// instance returns an Instance on the env's folder whose processes are
// stopped when the test ends, even if it failed.
func (e *env) instance() *Instance { return e.instanceWith(nil) }

// instanceWith is instance with Config.OnExit set.
func (e *env) instanceWith(onExit func()) *Instance {
	i := New(Config{
		Dir:         filepath.Join(e.root, "inst"),
		ConfigFiles: []string{e.cfgPath},
		Logger:      testLogger(e.t),
		StopTimeout: 20 * time.Second,
		OnExit:      onExit,
	})
	e.t.Cleanup(func() { cleanupInstance(e.t, i) })
	return i
}

// cleanupInstance stops i; should the graceful stop fail, it hard-stops the
// master this test started (SIGTERM, by pid) so no HAProxy outlives the test.
func cleanupInstance(t *testing.T, i *Instance) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := i.Stop(ctx); err != nil {
		t.Logf("cleanup: stop: %v", err)
	}
	b, err := os.ReadFile(i.pidFile())
	if err != nil {
		return
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid > 0 && isOurMaster(pid, i.masterSock()) {
		t.Logf("cleanup: master %d still running, sending SIGTERM", pid)
		_ = syscall.Kill(pid, syscall.SIGTERM)
		waitGone(t, pid, 10*time.Second)
	}
}

func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("process %d still exists after %s", pid, d)
}

func start(t *testing.T, i *Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := i.Start(ctx); err != nil {
		t.Fatalf("start: %v", err)
	}
}

func reload(t *testing.T, i *Instance) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := i.Reload(ctx); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

// get does one request with a fresh connection and returns the X-Config
// header of a 200 answer.
func get(t *testing.T, url string) string {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", url, resp.StatusCode)
	}
	return resp.Header.Get("X-Config")
}

// ourMasters counts the haproxy masters serving sock: processes started with
// it whose parent is not one of them (workers share the master's command line).
func ourMasters(t *testing.T, sock string) []int {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	matching := map[int]int{} // pid -> ppid
	for _, p := range procs {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if !isOurMaster(pid, sock) {
			continue
		}
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		ppid, _ := strconv.Atoi(f[1])
		matching[pid] = ppid
	}
	var masters []int
	for pid, ppid := range matching {
		if _, child := matching[ppid]; !child {
			masters = append(masters, pid)
		}
	}
	return masters
}

// testLogger sends slog output to t.Log until the test is over; supervisor
// goroutines may log after that and must not make the test panic.
func testLogger(t *testing.T) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	t    *testing.T
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}
