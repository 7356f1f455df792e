// Package process runs one HAProxy master-worker instance: it starts the
// master or adopts one left by a previous pier process, reloads it only with
// configuration that passed `haproxy -c`, confirms every reload through the
// master CLI, restarts a master that died, and stops it gracefully.
//
// It knows nothing about load balancers. An instance loads any list of
// configuration files, so a caller may pack several load balancers into one
// instance (a shard) and change that list between reloads.
//
// Layout of the instance folder (Config.Dir):
//
//	master.sock   master CLI (mode 600)
//	haproxy.pid   master pid, written by HAProxy
//	haproxy.log   stdout and stderr of the master and its workers
//	conf -> conf-XXXX   the configuration HAProxy loads (-f conf)
//	conf-XXXX/    copies of the configuration files that passed the check
//	              and, after a reload, were loaded: the last-known-good set
//
// With Config.Netns the master runs in that network namespace through `ip
// netns exec`, which execs HAProxy: the pid tracked, written and adopted is
// HAProxy's own, and a reload re-executes it in the same namespace.
//
// HAProxy never reads the caller's files directly: they are copied, checked
// and then swapped in, so a file rewritten after the check cannot reach a
// reload or a restart, and a restart always uses the last set that loaded.
package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"pier.dev/pier/internal/netnsdo"
)

// Config describes one instance.
type Config struct {
	// Binary is the haproxy executable; default "haproxy" from PATH.
	Binary string
	// Dir is the instance folder (see the package comment). Keep it short:
	// a Unix socket path must fit in 107 bytes.
	Dir string
	// ConfigFiles are loaded in this order. Paths inside them should be
	// absolute: HAProxy loads copies that live in Dir.
	ConfigFiles []string
	Logger      *slog.Logger
	// StopTimeout bounds how long Stop waits for the soft stop (default 60s).
	// HAProxy's own hard-stop-after ends draining; we never SIGKILL a
	// draining HAProxy, so after this timeout Stop returns an error and
	// leaves the master to finish on its own.
	StopTimeout time.Duration
	// StartTimeout bounds how long a start or an adoption waits for the
	// master CLI to show a worker (default 30s).
	StartTimeout time.Duration
	// ReloadTimeout bounds how long Reload waits for the master to report
	// the outcome of a reload (default 30s).
	ReloadTimeout time.Duration
	// Netns, when set, names the network namespace (ip netns) the master
	// and its workers run in; `haproxy -c` runs in the caller's. It must
	// pass netnsdo.CheckName.
	Netns string
	// OnExit, when set, is called as soon as the supervisor sees the
	// master exit on its own (before its restart): the caller's view of
	// what serves changed at that moment, not at its next look. It must
	// not block.
	OnExit func()
}

// Stats are counters for metrics. They only grow.
type Stats struct {
	ReloadsOK     uint64 // reloads confirmed by a new worker
	ReloadsFailed uint64 // reloads HAProxy refused or did not confirm; the old worker kept serving
	ChecksFailed  uint64 // reloads refused before signalling because `haproxy -c` failed
	Restarts      uint64 // masters started by the supervisor after the previous one exited
	// RuntimeConnections counts connections to the runtime API (Runtime
	// and RuntimeBatch each open one).
	RuntimeConnections uint64
}

var (
	// ErrNotRunning is returned by Reload when no master is running.
	ErrNotRunning = errors.New("haproxy is not running")
	// ErrCheckFailed wraps the output of a failed `haproxy -c`.
	ErrCheckFailed = errors.New("haproxy configuration check failed")
	// ErrReloadFailed is returned when HAProxy did not take a reload.
	ErrReloadFailed = errors.New("haproxy reload failed")
)

const (
	defaultStopTimeout   = 60 * time.Second
	defaultStartTimeout  = 30 * time.Second
	defaultReloadTimeout = 30 * time.Second
)

// Instance runs one HAProxy master. Its methods are safe for concurrent use;
// Start, Reload, Stop and supervisor restarts are serialised.
type Instance struct {
	cfg Config
	log *slog.Logger

	// mu serialises the operations that change the process: Start, Reload,
	// Stop, Detach and supervisor restarts. It is held for a whole reload.
	mu      sync.Mutex
	stop    chan struct{} // closed to end supervision; nil when not supervising
	supDone chan struct{} // closed when the supervisor goroutine returned
	// cur is read without mu, so Running and PID never wait for a reload.
	cur atomic.Pointer[master] // nil when not running

	filesMu sync.Mutex
	files   []string

	// listed is the active set as RestageFile last found it (mu).
	listed activeListing

	reloadsOK, reloadsFailed, checksFailed, restarts atomic.Uint64
	runtimeConns                                     atomic.Uint64

	// fdShortfall is what the last start or reload said of the file
	// descriptor limit (fdlimit.go); the zero value when it fitted.
	fdShortfall atomic.Pointer[FDShortfall]

	// afterCheck, when set by a test, runs between a passed check and the
	// reload, to model a configuration that breaks after it was checked.
	afterCheck func(stagedDir string)
}

// New returns an Instance for cfg. It starts nothing.
func New(cfg Config) *Instance {
	if cfg.Binary == "" {
		cfg.Binary = "haproxy"
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = defaultStopTimeout
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = defaultStartTimeout
	}
	if cfg.ReloadTimeout <= 0 {
		cfg.ReloadTimeout = defaultReloadTimeout
	}
	if abs, err := filepath.Abs(cfg.Dir); err == nil && cfg.Dir != "" {
		cfg.Dir = abs
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Instance{
		cfg:   cfg,
		log:   log.With("haproxy_dir", cfg.Dir),
		files: append([]string(nil), cfg.ConfigFiles...),
	}
}

func (i *Instance) masterSock() string { return filepath.Join(i.cfg.Dir, "master.sock") }
func (i *Instance) pidFile() string    { return filepath.Join(i.cfg.Dir, "haproxy.pid") }
func (i *Instance) logFile() string    { return filepath.Join(i.cfg.Dir, "haproxy.log") }
func (i *Instance) confLink() string   { return filepath.Join(i.cfg.Dir, "conf") }

// SetConfigFiles replaces the list of files the next Reload loads.
func (i *Instance) SetConfigFiles(files []string) {
	i.filesMu.Lock()
	defer i.filesMu.Unlock()
	i.files = append([]string(nil), files...)
}

func (i *Instance) configFiles() []string {
	i.filesMu.Lock()
	defer i.filesMu.Unlock()
	return append([]string(nil), i.files...)
}

// Start adopts a live master left in Dir by a previous pier process (its pid
// file names a live haproxy started with our master socket, and the socket
// answers), or else checks the configuration and starts a new master in its
// own process group, so a signal meant for pier does not reach it. Start then
// supervises the master until Stop or Detach.
func (i *Instance) Start(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.stop != nil {
		return errors.New("haproxy instance already started")
	}
	if i.cfg.Dir == "" {
		return errors.New("haproxy instance: no Dir")
	}
	if err := netnsdo.CheckName(i.cfg.Netns); err != nil {
		return fmt.Errorf("haproxy instance: %w", err)
	}
	// The kernel limit for a Unix socket path is 108 bytes with the NUL.
	if len(i.masterSock()) > 107 {
		return fmt.Errorf("haproxy instance: master socket path %q is too long for a Unix socket", i.masterSock())
	}
	if err := os.MkdirAll(i.cfg.Dir, 0o700); err != nil {
		return err
	}
	m, err := i.adopt(ctx)
	if err != nil {
		return err
	}
	if m == nil {
		if m, err = i.startFresh(ctx); err != nil {
			return err
		}
	}
	i.cur.Store(m)
	i.stop = make(chan struct{})
	i.supDone = make(chan struct{})
	go i.supervise(i.stop, i.supDone)
	return nil
}

// startFresh checks and activates the configured files, then starts a master.
// If the master does not come up, the previously active set is restored.
// ctx cancels the check only, as for Reload: a master once launched is
// waited for.
func (i *Instance) startFresh(ctx context.Context) (*master, error) {
	staged, err := i.stageAndCheck(ctx)
	if err != nil {
		return nil, err
	}
	ctx = context.WithoutCancel(ctx)
	prev, err := i.activate(staged)
	if err != nil {
		_ = os.RemoveAll(staged)
		return nil, err
	}
	m, err := i.launch(ctx)
	if err != nil {
		i.rollback(prev, staged)
		return nil, err
	}
	i.prune()
	return m, nil
}

// Stop soft-stops HAProxy (SIGUSR1 to the master: workers finish their
// requests, then everything exits) and waits for the master to exit, at most
// StopTimeout. It never sends SIGKILL: on timeout it returns an error and
// HAProxy keeps draining until its hard-stop-after.
func (i *Instance) Stop(ctx context.Context) error { return i.stopWithin(ctx, 0) }

// StopWithin is Stop for a process with no traffic left to finish: the
// node handed its addresses over, and a connection still open here is one
// whose client's packets now reach another node. It soft-stops as Stop
// does, and once grace has passed with the process still draining it
// stops it hard (SIGTERM: HAProxy closes what is left at once), so that an
// agent's exit, and a pod's, is bounded by grace rather than by
// hard-stop-after.
func (i *Instance) StopWithin(ctx context.Context, grace time.Duration) error {
	return i.stopWithin(ctx, grace)
}

func (i *Instance) stopWithin(ctx context.Context, grace time.Duration) error {
	m := i.endSupervision()
	if m == nil || m.exited() {
		return nil
	}
	log := i.log.With("master_pid", m.pid)
	log.Info("stopping haproxy (soft stop)")
	// ErrProcessDone: it exited on its own meanwhile; done closes shortly.
	if err := m.signal(syscall.SIGUSR1, i.masterSock()); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("soft stop haproxy: %w", err)
	}
	timer := time.NewTimer(i.cfg.StopTimeout)
	defer timer.Stop()
	// HAProxy 2.6 ignores a signal that arrives while the master re-executes
	// (measured: SIGUSR1 within ~0.2 s of a reload was lost). A soft stop is
	// idempotent, so repeat it until the master exits.
	resend := time.NewTicker(time.Second)
	defer resend.Stop()
	var hard <-chan time.Time
	if grace > 0 {
		t := time.NewTimer(grace)
		defer t.Stop()
		hard = t.C
	}
	for {
		select {
		case <-hard:
			log.Warn("haproxy still draining after the handover's grace: hard stop (SIGTERM)", "grace", grace)
			if err := m.signal(syscall.SIGTERM, i.masterSock()); err != nil && !errors.Is(err, os.ErrProcessDone) {
				log.Warn("hard stop haproxy", "error", err)
			}
		case <-m.done:
			_ = os.Remove(i.pidFile())
			log.Info("haproxy stopped", "exit", m.exit)
			return nil
		case <-resend.C:
			_ = m.signal(syscall.SIGUSR1, i.masterSock())
		case <-ctx.Done():
			log.Warn("haproxy still draining, left to finish on its own", "err", ctx.Err())
			return ctx.Err()
		case <-timer.C:
			log.Warn("haproxy still draining, left to finish on its own", "timeout", i.cfg.StopTimeout)
			return errors.New("haproxy still draining after stop timeout")
		}
	}
}

// Detach ends supervision and leaves HAProxy running, for a pier process that
// shuts down: the data plane keeps serving and the next pier adopts it.
func (i *Instance) Detach() {
	if m := i.endSupervision(); m != nil {
		m.release()
		i.log.Info("detached from haproxy, left running", "master_pid", m.pid)
	}
}

// endSupervision stops the supervisor and returns the master it watched.
// Once stop is closed under mu no restart can begin, so cur is final here.
func (i *Instance) endSupervision() *master {
	i.mu.Lock()
	stop, supDone := i.stop, i.supDone
	i.stop, i.supDone = nil, nil
	if stop != nil {
		close(stop)
	}
	m := i.cur.Swap(nil)
	i.mu.Unlock()
	if supDone != nil {
		<-supDone
	}
	return m
}

// Running reports whether a master is running.
func (i *Instance) Running() bool {
	m := i.cur.Load()
	return m != nil && !m.exited()
}

// PID returns the master pid, or 0 when not running.
func (i *Instance) PID() int {
	m := i.cur.Load()
	if m == nil || m.exited() {
		return 0
	}
	return m.pid
}

// Stats returns the counters.
func (i *Instance) Stats() Stats {
	return Stats{
		ReloadsOK:     i.reloadsOK.Load(),
		ReloadsFailed: i.reloadsFailed.Load(),
		ChecksFailed:  i.checksFailed.Load(),
		Restarts:      i.restarts.Load(),

		RuntimeConnections: i.runtimeConns.Load(),
	}
}

// Workers returns the workers the master lists (`show proc`), current and old.
func (i *Instance) Workers(ctx context.Context) ([]Proc, error) {
	st, err := showProc(ctx, i.masterSock())
	if err != nil {
		return nil, err
	}
	return st.workers, nil
}

// Runtime sends one command to a worker's stats socket (the runtime API) and
// returns the answer. It refuses anything but a single command: no newline,
// no ';' (HAProxy's command separator), no control character.
func (i *Instance) Runtime(ctx context.Context, socketPath, cmd string) (string, error) {
	if err := singleCommand(cmd); err != nil {
		return "", err
	}
	i.runtimeConns.Add(1)
	return exchange(ctx, socketPath, cmd)
}

// StopStale soft-stops a master that a previous pier process left running
// in Dir, if there is one, and waits for it like Stop. It never starts
// HAProxy. The agent uses it for load balancers deleted while it was down.
func (i *Instance) StopStale(ctx context.Context) error {
	i.mu.Lock()
	if i.stop != nil || i.cur.Load() != nil {
		i.mu.Unlock()
		return errors.New("haproxy instance is running under this Instance: use Stop")
	}
	m, err := i.adopt(ctx)
	if err != nil || m == nil {
		i.mu.Unlock()
		return err
	}
	i.cur.Store(m)
	i.mu.Unlock()
	return i.Stop(ctx)
}

// Adopted reports whether the running master was adopted from a previous
// pier process rather than started by this Instance.
func (i *Instance) Adopted() bool {
	m := i.cur.Load()
	return m != nil && m.adopted
}
