package kubeapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"pier.dev/pier/internal/testport"
)

// process is one child (etcd, kube-apiserver, kube-controller-manager)
// whose output goes to a log file in the server's folder.
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	err     error         // Wait's result, valid after done
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s: open log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// stop asks the process to end (SIGTERM), then kills it after grace. It
// returns once the process is gone, so ports and files are free.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's log, for error messages: a failed start
// is only debuggable with the child's own words.
func (p *process) tail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 25 {
		lines = lines[len(lines)-25:]
	}
	return p.logPath + ":\n" + strings.Join(lines, "\n")
}

// waitHTTP polls url until check accepts the response, the process exits or
// ctx ends. client may be nil for plain HTTP.
func (p *process) waitHTTP(ctx context.Context, client *http.Client, url string, check func(int, []byte) bool) error {
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Second}
	}
	var last string
	for {
		status, body, err := get(ctx, client, url)
		switch {
		case err == nil && check(status, body):
			return nil
		case err != nil:
			last = err.Error()
		default:
			last = fmt.Sprintf("HTTP %d: %s", status, truncate(body, 300))
		}
		if p.exited() {
			return fmt.Errorf("%s exited (%v) before %s was ready\n%s", p.name, p.err, url, p.tail())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %s not ready (%s): %w\n%s", p.name, url, last, ctx.Err(), p.tail())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func get(ctx context.Context, client *http.Client, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body, err
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// freePorts picks n distinct loopback ports below the ephemeral range
// (see testport). Another process may still take one before the child binds
// it; callers retry a start whose child reports the address in use.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		p, err := testport.Free()
		if err != nil {
			return nil, fmt.Errorf("reserve a port: %w", err)
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// addressInUse reports whether a child's log says it lost the port race.
func addressInUse(p *process) bool {
	data, _ := os.ReadFile(p.logPath)
	return bytes.Contains(data, []byte("address already in use"))
}

// insecureClient talks to a component's own self-signed health endpoint;
// only its status code is looked at.
func insecureClient() *http.Client {
	return &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // health probe of a local child
	}
}

var errNotStarted = errors.New("kubeapi: server not started")
