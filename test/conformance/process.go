package conformance

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// process is a child the files cluster started, in its own process group
// so that stopping it also stops whatever it started (HAProxy under pier).
type process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{} // closed once the process has been waited for
	err     error         // exit status, valid after done

	stopOnce sync.Once
}

// startProcess runs argv with env added to this process's environment and
// stdout and stderr appended to logPath.
func startProcess(name string, argv, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = newProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, strings.Join(argv, " "), err)
	}
	p := &process{name: name, logPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop asks the process to end with SIGTERM, waits up to grace, then kills
// its whole process group, so no child it left behind survives the test.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pid := p.cmd.Process.Pid
		if ok, _ := p.exited(); !ok {
			_ = terminate(pid)
			select {
			case <-p.done:
			case <-time.After(grace):
			}
		}
		// The leader may be gone while its children live on in the group.
		_ = killGroup(pid)
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	})
}

// logTail returns the last lines of the process log, for error messages.
func (p *process) logTail(lines int) string {
	return tail(p.logPath, lines)
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	data = bytes.TrimRight(data, "\n")
	all := strings.Split(string(data), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
