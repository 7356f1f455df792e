package process

import (
	"os/exec"
	"testing"
	"time"
)

// TestWatchAdoptedThroughExec: an adopted master that re-executes itself
// (a reload) is the same process, however long its command line is empty
// or different; once it dies the watcher says so within a few polls.
func TestWatchAdoptedThroughExec(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.2; exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	since, ok := startTime(cmd.Process.Pid)
	if !ok {
		t.Fatal("no start time for a running process")
	}
	m := &master{pid: cmd.Process.Pid, adopted: true, done: make(chan struct{}), quit: make(chan struct{})}
	defer close(m.quit)
	go watchAdopted(m, since)

	select {
	case <-m.done:
		t.Fatalf("the process counted as gone across its exec: %s", m.exit)
	case <-time.After(600 * time.Millisecond):
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.done:
	case <-time.After(time.Second):
		t.Fatal("the killed process still counts as running after 1 s")
	}
}
