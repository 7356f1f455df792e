package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Reload loads the configured files into the running master, seamlessly: the
// master re-executes, forks a new worker on the same listening sockets and the
// old worker drains.
//
// The files are copied and checked first; a copy `haproxy -c` refuses is
// never signalled (ErrCheckFailed). HAProxy 2.6 gives no synchronous answer to
// a reload, so Reload reads `show proc` until the master's reload counter
// moved, then requires "[failed: 0]" and a new current worker. Otherwise it
// returns ErrReloadFailed with HAProxy's output, restores the previous set as
// the one a restart loads, and the old worker keeps serving.
//
// ctx cancels the check (a set nobody wants any more need not be checked
// to its end), not what follows: once the master is asked to reload, the
// outcome is awaited (within ReloadTimeout), since giving up would roll
// back the files of a set the master may be loading.
func (i *Instance) Reload(ctx context.Context) error { return i.reload(ctx, 0) }

// deferredNice is the CPU niceness of a reload nothing waits on: at
// thousands of load balancers its staging, check and parse are seconds
// of CPU, which must not come out of the changes served meanwhile. On an
// idle machine it runs as fast.
const deferredNice = 10

// ReloadDeferred is Reload for a reload nothing waits on (the landing's
// fold-in), at deferredNice: it runs on an OS thread at that niceness,
// so the staging and the `haproxy -c` it forks do too, and, when pier
// runs as root, the master is reniced for its parse.
func (i *Instance) ReloadDeferred(ctx context.Context) error {
	return atNiceness(deferredNice, func() error { return i.reload(ctx, deferredNice) })
}

func (i *Instance) reload(ctx context.Context, nice int) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	m := i.cur.Load()
	if m == nil || m.exited() {
		return ErrNotRunning
	}
	began := time.Now()
	staged, err := i.stageAndCheck(ctx)
	if err != nil {
		return fmt.Errorf("reload refused: %w", err)
	}
	ctx = context.WithoutCancel(ctx) // checked: the rest is seen through
	checked := time.Since(began)
	if i.afterCheck != nil {
		i.afterCheck(staged)
	}
	before, err := showProc(ctx, i.masterSock())
	if err != nil {
		_ = os.RemoveAll(staged)
		return fmt.Errorf("reload: read master state: %w", err)
	}
	prev, err := i.activate(staged)
	if err != nil {
		_ = os.RemoveAll(staged)
		return fmt.Errorf("reload: %w", err)
	}
	offset := i.logSize()
	start := time.Now()
	// The master re-executes and parses the whole set again, as the
	// check did. A deferred reload lowers its priority for that; the
	// worker it forks inherits it, so afterwards the master and every
	// worker get the normal priority back (which takes root).
	renice := nice != 0 && os.Geteuid() == 0
	if renice {
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, m.pid, nice)
	}
	after, err := i.reloadAndConfirm(ctx, m, before)
	if renice {
		i.normalPriority(m.pid)
	}
	log := i.log.With("master_pid", m.pid, "check_took", checked.Round(time.Millisecond),
		"reload_took", time.Since(start).Round(time.Millisecond))
	if err != nil {
		i.rollback(prev, staged)
		i.reloadsFailed.Add(1)
		err = fmt.Errorf("%w: %v%s", ErrReloadFailed, err, i.logSince(offset))
		log.Warn("haproxy reload failed, previous worker keeps serving", "err", err)
		return err
	}
	i.prune()
	i.noteFDLimit(i.logSince(offset))
	i.reloadsOK.Add(1)
	worker, _ := newWorker(before, after)
	log.Info("haproxy reloaded", "worker_pid", worker.PID, "old_workers", len(after.workers)-len(after.current()))
	return nil
}

// normalPriority puts the master and the workers it lists back at
// niceness 0 after a deferred reload. A worker left niced would serve
// behind every other process of the node: that is logged.
func (i *Instance) normalPriority(master int) {
	pids := []int{master}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if st, err := showProc(ctx, i.masterSock()); err == nil {
		for _, w := range st.workers {
			pids = append(pids, w.PID)
		}
	} else {
		i.log.Warn("after a deferred reload: cannot list the workers to restore their CPU priority", "err", err)
	}
	for _, pid := range pids {
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, pid, 0); err != nil && !errors.Is(err, syscall.ESRCH) {
			i.log.Warn("after a deferred reload: cannot restore a process's CPU priority", "pid", pid, "err", err)
		}
	}
}

// reloadAndConfirm asks the master to reload and waits for the outcome. The
// master CLI `reload` is used rather than SIGUSR2: HAProxy 2.6 ignores a
// signal that arrives while the master re-executes (measured on 2.6.12),
// whereas the CLI only accepts a command once the master is in its event
// loop, so a reload is either refused visibly or taken.
func (i *Instance) reloadAndConfirm(ctx context.Context, m *master, before procStatus) (procStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, i.cfg.ReloadTimeout)
	defer cancel()
	if err := sendReload(ctx, i.masterSock()); err != nil {
		return procStatus{}, err
	}
	var last error
	for {
		st, err := showProc(ctx, i.masterSock())
		switch {
		case err != nil:
			last = err // the master is re-executing; it answers when done
		case st.master.PID != m.pid:
			return procStatus{}, fmt.Errorf("master socket answered for pid %d, expected %d", st.master.PID, m.pid)
		case st.master.Reloads <= before.master.Reloads:
			last = errors.New("reload not processed yet")
		case st.master.FailedReloads > 0:
			return procStatus{}, fmt.Errorf("master reports %d failed reload(s)", st.master.FailedReloads)
		default:
			if _, ok := newWorker(before, st); ok {
				return st, nil
			}
			last = errors.New("no new worker yet")
		}
		select {
		case <-m.done:
			return procStatus{}, fmt.Errorf("master exited during reload: %s", m.exit)
		case <-ctx.Done():
			return procStatus{}, fmt.Errorf("no confirmation within %s: %w (last: %v)", i.cfg.ReloadTimeout, ctx.Err(), last)
		case <-time.After(pollInterval):
		}
	}
}

// newWorker returns a current worker of after that before did not list.
func newWorker(before, after procStatus) (Proc, bool) {
	seen := map[int]bool{}
	for _, w := range before.workers {
		seen[w.PID] = true
	}
	for _, w := range after.current() {
		if !seen[w.PID] {
			return w, true
		}
	}
	return Proc{}, false
}
