//go:build unix

package conformance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// stop must take down what the process left behind in its group, as a
// pier that leaves HAProxy running would.
func TestStopKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	// The shell dies on SIGTERM; its background child ignores it.
	script := `trap '' TERM; (trap '' TERM; sleep 300) & echo $! > ` + pidFile + `; trap - TERM; wait`
	p, err := startProcess("group", []string{"/bin/sh", "-c", script}, nil, filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	var child int
	deadline := time.Now().Add(5 * time.Second)
	for child == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(10 * time.Millisecond)
	}
	if child == 0 {
		t.Fatal("child pid never written")
	}

	p.stop(200 * time.Millisecond)
	if done, _ := p.exited(); !done {
		t.Error("leader still running after stop")
	}
	for time.Now().Before(deadline) {
		if syscall.Kill(child, 0) != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = syscall.Kill(child, syscall.SIGKILL)
	t.Fatalf("child %d survived stop", child)
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("a\nb\nc\nd\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := tail(path, 2); got != "c\nd" {
		t.Errorf("tail = %q", got)
	}
	if got := tail(path, 10); got != "a\nb\nc\nd" {
		t.Errorf("tail = %q", got)
	}
}
