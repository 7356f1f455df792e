package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

const (
	minBackoff   = time.Second
	maxBackoff   = 30 * time.Second
	pollInterval = 25 * time.Millisecond
	// adoptedPoll is how soon the death of an adopted master is seen
	// (our own child's is seen at once, by Wait). A caller deciding
	// whether this node may hold addresses asks every 50 ms, so a death
	// must show within that. One poll reads /proc/<pid>/stat (two files
	// took about 35 µs, measured): 50 polls a second cost under 0.2% of a
	// core per adopted master.
	adoptedPoll    = 20 * time.Millisecond
	abandonTimeout = 5 * time.Second
	maxLogSize     = 8 << 20
)

// master is one HAProxy master process, our child or adopted.
type master struct {
	pid     int
	adopted bool
	started time.Time
	done    chan struct{} // closed once the process has exited
	exit    string        // how it exited; written before done is closed
	proc    *os.Process   // our child only

	releaseOnce sync.Once
	quit        chan struct{} // ends the watcher of an adopted master
}

func (m *master) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the master. For our child the os.Process guards against
// pid reuse (it is not reaped before Wait returns); for an adopted master we
// check it is still the haproxy that serves our master socket.
func (m *master) signal(sig syscall.Signal, sock string) error {
	if m.proc != nil {
		return m.proc.Signal(sig)
	}
	if !isOurMaster(m.pid, sock) {
		return os.ErrProcessDone
	}
	return syscall.Kill(m.pid, sig)
}

// release stops watching an adopted master; our own child stays waited for,
// so it never lingers as a zombie.
func (m *master) release() {
	if m.quit != nil {
		m.releaseOnce.Do(func() { close(m.quit) })
	}
}

// launch starts a master on the active configuration and waits until the
// master CLI lists a worker. Output goes to a file in Dir rather than a pipe:
// the master outlives pier, and a pipe to a dead pier would break its writes.
func (i *Instance) launch(ctx context.Context) (*master, error) {
	offset := i.logSize()
	out, err := os.OpenFile(i.logFile(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	// A stale pid file would name a dead master to a later adoption.
	_ = os.Remove(i.pidFile())
	cmd := netnsdo.Command(context.Background(), i.cfg.Netns, i.cfg.Binary, "-W", "-S", i.masterSock()+",mode,600",
		"-p", i.pidFile(), "-f", i.confLink())
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = minimalEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start haproxy: %w", err)
	}
	m := &master{pid: cmd.Process.Pid, started: time.Now(), done: make(chan struct{}), proc: cmd.Process}
	go func() {
		err := cmd.Wait()
		if cmd.ProcessState != nil {
			m.exit = cmd.ProcessState.String()
		} else {
			m.exit = err.Error()
		}
		close(m.done)
	}()
	log := i.log.With("master_pid", m.pid)
	st, err := i.waitUp(ctx, m)
	if err != nil {
		// It never served, so there is nothing to drain: a hard stop is fine.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(abandonTimeout):
		}
		err = fmt.Errorf("start haproxy (pid %d): %w%s", m.pid, err, i.logSince(offset))
		log.Warn("haproxy did not start", "err", err)
		return nil, err
	}
	i.noteFDLimit(i.logSince(offset))
	log.Info("haproxy started", "worker_pids", pids(st.current()))
	return m, nil
}

// adopt returns the live master that a previous pier process left in Dir, or
// nil when there is none. A live master that does not answer is an error:
// starting a second one beside it would fight over the same sockets.
func (i *Instance) adopt(ctx context.Context) (*master, error) {
	b, err := os.ReadFile(i.pidFile())
	if err != nil {
		return nil, nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 || !isOurMaster(pid, i.masterSock()) {
		return nil, nil
	}
	if err := inNetnsOf(pid, i.cfg.Netns); err != nil {
		return nil, fmt.Errorf("haproxy master %d holds %s: %w", pid, i.cfg.Dir, err)
	}
	since, ok := startTime(pid)
	if !ok {
		return nil, nil
	}
	m := &master{pid: pid, adopted: true, started: time.Now(), done: make(chan struct{}), quit: make(chan struct{})}
	go watchAdopted(m, since)
	st, err := i.waitUp(ctx, m)
	if err != nil && m.exited() {
		i.log.Info("previous haproxy exited while adopting it; starting a new one", "master_pid", pid)
		return nil, nil
	}
	if err != nil {
		m.release()
		return nil, fmt.Errorf("haproxy master %d holds %s but does not answer on its master socket: %w", pid, i.cfg.Dir, err)
	}
	i.log.Info("adopted running haproxy", "master_pid", pid, "worker_pids", pids(st.workers))
	return m, nil
}

// waitUp polls the master CLI until it names m as master with at least one
// current worker, m exits, or StartTimeout passes.
func (i *Instance) waitUp(ctx context.Context, m *master) (procStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, i.cfg.StartTimeout)
	defer cancel()
	var last error
	for {
		st, err := showProc(ctx, i.masterSock())
		switch {
		case err != nil:
			last = err
		case st.master.PID != m.pid:
			last = fmt.Errorf("master socket answered for pid %d", st.master.PID)
		case len(st.current()) == 0:
			last = errors.New("no worker yet")
		default:
			return st, nil
		}
		select {
		case <-m.done:
			return procStatus{}, fmt.Errorf("master exited: %s", m.exit)
		case <-ctx.Done():
			return procStatus{}, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// watchAdopted closes m.done when the adopted master is gone: its pid
// no longer runs the process that started at since (a zombie, another
// process, none). The master socket is not a liveness signal: a master
// busy loading a large configuration does not answer, and restarting
// beside it would make two. Nor is the command line: while the master
// re-executes itself for a reload, /proc/<pid>/cmdline is empty, for
// more than 60 ms on a loaded machine (which made the reload of an
// adopted master report it exited, and left it running unsupervised).
// The start time is the kernel's, unchanged by exec and new with a
// reused pid.
func watchAdopted(m *master, since uint64) {
	t := time.NewTicker(adoptedPoll)
	defer t.Stop()
	for {
		select {
		case <-m.quit:
			return
		case <-t.C:
		}
		if now, ok := startTime(m.pid); !ok || now != since {
			m.exit = "exited (adopted; status unknown)"
			close(m.done)
			return
		}
	}
}

// startTime is pid's start time in clock ticks since boot (field 22 of
// /proc/<pid>/stat); ok is false when pid does not exist or is a zombie
// (reaped here when pier is its parent).
func startTime(pid int) (ticks uint64, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command, which may hold spaces and
	// parentheses: state is the first, start time the twentieth.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 20 || fields[0] == "Z" {
		reapIfChild(pid, fields)
		return 0, false
	}
	ticks, err = strconv.ParseUint(fields[19], 10, 64)
	return ticks, err == nil
}

// isOurMaster reports whether pid is a live (not zombie) haproxy started with
// sock as its master socket; the command line check guards against pid reuse.
func isOurMaster(pid int, sock string) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	if fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(fields) < 2 || fields[0] == "Z" {
		reapIfChild(pid, fields)
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(cmdline), "\x00")
	for n := 0; n+1 < len(args); n++ {
		if args[n] == "-S" && strings.Split(args[n+1], ",")[0] == sock {
			return true
		}
	}
	return false
}

// reapIfChild reaps a zombie master whose parent is pier: when pier runs as
// pid 1 or a subreaper, an adopted master is re-parented to it on exit.
func reapIfChild(pid int, statFields []string) {
	if len(statFields) < 2 || statFields[0] != "Z" || statFields[1] != strconv.Itoa(os.Getpid()) {
		return
	}
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
}

// supervise restarts the master whenever it exits, until stop is closed.
func (i *Instance) supervise(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	delay := minBackoff
	for {
		m := i.cur.Load()
		if m == nil {
			return
		}
		select {
		case <-stop:
			return
		case <-m.done:
		}
		i.cur.CompareAndSwap(m, nil)
		if i.cfg.OnExit != nil {
			i.cfg.OnExit()
		}
		i.log.Warn("haproxy master exited, restarting", "master_pid", m.pid, "adopted", m.adopted, "exit", m.exit,
			"uptime", time.Since(m.started).Round(time.Millisecond), "backoff", delay)
		if time.Since(m.started) > maxBackoff {
			delay = minBackoff // it ran long enough: this is not a crash loop
		}
		if !i.restart(stop, &delay) {
			return
		}
	}
}

// restart starts a master on the last configuration that loaded, retrying
// with exponential backoff. It returns false when stop is closed.
func (i *Instance) restart(stop <-chan struct{}, delay *time.Duration) bool {
	for {
		select {
		case <-stop:
			return false
		case <-time.After(*delay):
		}
		*delay = min(*delay*2, maxBackoff)
		i.mu.Lock()
		select {
		case <-stop:
			i.mu.Unlock()
			return false
		default:
		}
		m, err := i.launch(context.Background())
		if err == nil {
			i.cur.Store(m)
		}
		i.mu.Unlock()
		if err == nil {
			i.restarts.Add(1)
			i.log.Info("haproxy restarted by supervisor", "master_pid", m.pid)
			return true
		}
		i.log.Warn("haproxy restart failed", "err", err, "retry_in", *delay)
	}
}

// logSize returns the size of haproxy.log, first truncating it when it grew
// too large (HAProxy opened it O_APPEND, so its next write lands at 0).
func (i *Instance) logSize() int64 {
	fi, err := os.Stat(i.logFile())
	if err != nil {
		return 0
	}
	if fi.Size() > maxLogSize && os.Truncate(i.logFile(), 0) == nil {
		return 0
	}
	return fi.Size()
}

// logSince returns what HAProxy wrote after offset, for error messages.
func (i *Instance) logSince(offset int64) string {
	f, err := os.Open(i.logFile())
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, maxOutput)
	n, _ := f.ReadAt(buf, offset)
	if out := trimOutput(buf[:n]); out != "" {
		return "\nhaproxy output:\n" + out
	}
	return ""
}

func pids(ps []Proc) []int {
	out := make([]int, len(ps))
	for n, p := range ps {
		out[n] = p.PID
	}
	return out
}

// minimalEnv keeps pier's environment (tokens, credentials) away from
// HAProxy, whose configuration expands "$VAR" inside double quotes.
func minimalEnv() []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	return []string{"PATH=" + path}
}
