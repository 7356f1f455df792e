package vrrp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"pier.dev/pier/internal/fsutil"
	"pier.dev/pier/internal/netnsdo"
)

// Keepalived runs one keepalived for a node. It is safe for concurrent use.
type Keepalived struct {
	binary string
	// netns, when set, is the network namespace keepalived runs in
	// (`pier run --nodes`, tests); an agent on a node leaves it empty.
	netns  string
	logger *slog.Logger

	mu      sync.Mutex
	cfg     Config
	pid     int
	exited  chan struct{} // closed when the process we watch is gone
	stopped bool
	starts  int
	done    chan struct{} // closed when supervision ends

	// What the agent asked of each instance, and what keepalived says of
	// it (states.go).
	gates    map[string]gate // by instance: the last gate written
	log      stateLog
	loadedAt time.Time // the last start or reload
	nudgedAt time.Time // the last reload Reconcile sent
	nudges   int       // reloads Reconcile sent
	inRow    int       // of which since the instances last agreed
	// guarded is the advert filter's transaction last run (filter.go).
	guarded []byte
}

// NewKeepalived returns a supervisor; Apply starts keepalived. netns names
// the network namespace to run it in ("" for the agent's own); keepalived
// enters it itself (--namespace), which keeps its process tracking working
// where `ip netns exec` would not (vrrp_track_process then stays in
// FAULT, errno 111).
func NewKeepalived(binary, netns string, logger *slog.Logger) (*Keepalived, error) {
	if binary == "" {
		binary = "keepalived"
	}
	if netns != "" && !namePattern.MatchString(netns) {
		return nil, fmt.Errorf("network namespace %q: want %s", netns, namePattern)
	}
	return &Keepalived{binary: binary, netns: netns, logger: logger}, nil
}

func (c *Config) confPath() string { return filepath.Join(c.Dir, "keepalived.conf") }
func (c *Config) pidPath() string  { return filepath.Join(c.Dir, "keepalived.pid") }
func (c *Config) logPath() string  { return filepath.Join(c.Dir, "keepalived.log") }
func (c *Config) vrrpPidPath() string {
	return filepath.Join(c.Dir, "vrrp.pid")
}

// Apply makes keepalived run cfg: rendered, checked with `keepalived -t`,
// then started (or adopted, when a previous agent left one running on the
// same folder), or reloaded with SIGHUP when it runs already. Instances
// that persist keep their addresses across a reload. A track file that
// does not exist yet is created as FAULT: an instance may hold its
// addresses only once the agent says its HAProxy serves (SetHealthy).
func (k *Keepalived) Apply(ctx context.Context, cfg Config) error {
	out, err := Render(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(cfg.Dir, "track"), 0o700); err != nil {
		return fmt.Errorf("vrrp folder: %w", err)
	}
	if err := Check(ctx, k.binary, out, cfg.Dir); err != nil {
		return err
	}
	var created []string
	for _, in := range cfg.Instances {
		if _, err := os.Stat(cfg.TrackFile(in.Name)); errors.Is(err, os.ErrNotExist) {
			if err := fsutil.WriteAtomic(cfg.TrackFile(in.Name), []byte("1\n"), 0o600); err != nil {
				return err
			}
			created = append(created, in.Name)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	for _, name := range created {
		delete(k.gates, name)
		k.noteGate(name, false, now)
	}
	old, _ := os.ReadFile(cfg.confPath())
	if err := fsutil.WriteAtomic(cfg.confPath(), out, 0o600); err != nil {
		return err
	}
	prev := k.cfg
	k.cfg = cfg
	// Before keepalived starts or reloads: it never hears an advert the
	// filter would drop.
	k.guard(ctx, cfg)
	if k.pid == 0 {
		if pid := adoptable(cfg); pid != 0 {
			k.watch(pid)
			k.logger.Info("adopted running keepalived", "pid", pid)
			if bytes.Equal(old, out) {
				return nil
			}
		} else {
			return k.start()
		}
	}
	if bytes.Equal(old, out) && prev.Dir != "" {
		return nil
	}
	if err := syscall.Kill(k.pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("reload keepalived: %w", err)
	}
	k.loadedAt = now
	k.logger.Info("keepalived reloaded", "pid", k.pid, "instances", len(cfg.Instances))
	return nil
}

// SetHealthy writes the instance's track file: healthy lets it hold its
// addresses, unhealthy puts it in FAULT (priority 0 sent, addresses
// released, the peer takes over).
func (k *Keepalived) SetHealthy(instance string, healthy bool) error {
	k.mu.Lock()
	cfg := k.cfg
	k.mu.Unlock()
	if !namePattern.MatchString(instance) {
		return fmt.Errorf("instance %q: not a vrrp instance name", instance)
	}
	content := "1\n"
	if healthy {
		content = "0\n"
	}
	if err := fsutil.WriteAtomic(cfg.TrackFile(instance), []byte(content), 0o600); err != nil {
		return err
	}
	k.mu.Lock()
	k.noteGate(instance, healthy, time.Now())
	k.mu.Unlock()
	return nil
}

// start launches keepalived in the foreground of its own session, so that
// it outlives the agent (a killed agent must not move addresses; the next
// one adopts it). Called with k.mu held.
func (k *Keepalived) start() error {
	// Only called when no keepalived runs on this folder: pid files left
	// by one that died would make the new one believe it runs already.
	for _, p := range []string{k.cfg.pidPath(), k.cfg.vrrpPidPath()} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale pid file: %w", err)
		}
	}
	logf, err := os.OpenFile(k.cfg.logPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("keepalived log: %w", err)
	}
	defer logf.Close()
	if st, err := logf.Stat(); err == nil {
		k.log.reset(k.cfg.logPath(), st.Size()) // this run's lines only
	}
	args := []string{"--dont-fork", "--log-console", "--log-detail", "--vrrp",
		"--no-syslog", "-f", k.cfg.confPath(), "-p", k.cfg.pidPath(), "-r", k.cfg.vrrpPidPath()}
	if k.netns != "" {
		args = append(args, "--namespace="+k.netns)
	}
	cmd := exec.Command(k.binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start keepalived: %w", err)
	}
	k.starts++
	k.loadedAt = time.Now()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	k.pid, k.exited = cmd.Process.Pid, exited
	k.superviseOnce()
	k.logger.Info("keepalived started", "pid", k.pid, "instances", len(k.cfg.Instances))
	return nil
}

// watch follows a keepalived this process did not start. Called with k.mu
// held.
func (k *Keepalived) watch(pid int) {
	exited := make(chan struct{})
	go func() {
		for isKeepalived(pid) {
			time.Sleep(50 * time.Millisecond)
		}
		close(exited)
	}()
	k.pid, k.exited = pid, exited
	// Its states are in its log since its start line (states.go).
	k.log.reset(k.cfg.logPath(), 0)
	k.loadedAt = time.Now()
	k.superviseOnce()
}

func (k *Keepalived) superviseOnce() {
	if k.done != nil {
		return
	}
	k.done = make(chan struct{})
	go k.supervise()
}

// supervise restarts keepalived when it dies. A keepalived killed with
// SIGKILL leaves its addresses on the interface while the peer takes them
// over: two holders, with no end. So before
// anything else the addresses it held are removed.
func (k *Keepalived) supervise() {
	defer close(k.done)
	for {
		k.mu.Lock()
		exited := k.exited
		k.mu.Unlock()
		<-exited
		k.mu.Lock()
		if k.stopped {
			k.mu.Unlock()
			return
		}
		k.logger.Warn("keepalived exited; releasing its addresses and restarting it", "pid", k.pid)
		stopLeftChild(k.cfg)
		releaseAddresses(k.cfg, k.netns, k.logger)
		k.pid = 0
		err := k.start()
		k.mu.Unlock()
		if err != nil {
			k.logger.Error("keepalived restart failed; retrying", "error", err)
			time.Sleep(time.Second)
			k.mu.Lock()
			k.exited = closedChan()
			k.mu.Unlock()
		}
	}
}

// Stop ends keepalived with SIGTERM: it sends priority 0 and removes its
// addresses, so the peer takes over at once. The advert filter goes
// with it (filter.go).
func (k *Keepalived) Stop(ctx context.Context) error {
	k.mu.Lock()
	k.stopped = true
	pid, exited, done := k.pid, k.exited, k.done
	if pid == 0 {
		if k.guarded != nil { // installed by an Apply whose start failed
			k.unguard(ctx)
		}
		k.mu.Unlock()
		return nil
	}
	k.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop keepalived: %w", err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		return fmt.Errorf("stop keepalived: %w", ctx.Err())
	}
	if done != nil {
		<-done
	}
	k.mu.Lock()
	k.unguard(ctx)
	k.mu.Unlock()
	return nil
}

// PID is keepalived's parent pid, 0 when none runs.
func (k *Keepalived) PID() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.pid
}

// adoptable returns the pid of a keepalived running on cfg's folder.
func adoptable(cfg Config) int {
	b, err := os.ReadFile(cfg.pidPath())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || !isKeepalived(pid) {
		return 0
	}
	cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil || !bytes.Contains(cmdline, []byte(cfg.confPath()+"\x00")) {
		return 0
	}
	return pid
}

// isKeepalived reports whether pid is a live keepalived. A zombie is not:
// where PID 1 does not reap orphans (some containers), a killed child
// stays a zombie that kill(pid, 0) still finds.
func isKeepalived(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || end+3 > len(s) {
		return false
	}
	return s[open+1:end] == "keepalived" && s[end+2] != 'Z' && s[end+2] != 'X'
}

// releaseAddresses removes every address cfg's instances hold from their
// interfaces. An address that is not there is fine.
func releaseAddresses(cfg Config, netns string, logger *slog.Logger) {
	for _, in := range cfg.Instances {
		for _, a := range in.Addresses {
			if err := netnsdo.DeleteAddress(netns, in.Interface, a); err != nil {
				logger.Warn("release address", "address", a, "interface", in.Interface, "error", err)
			}
		}
	}
}

// stopLeftChild ends the VRRP child of a keepalived whose parent died: left
// running, it would keep sending adverts and put the addresses back. It is
// not HAProxy: nothing drains, so SIGKILL after a short grace is fine.
func stopLeftChild(cfg Config) {
	b, err := os.ReadFile(cfg.vrrpPidPath())
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 || !isKeepalived(pid) {
		return
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 20 && isKeepalived(pid); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if isKeepalived(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func closedChan() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
