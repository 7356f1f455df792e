package process

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Test 1: start, serve, and a graceful Stop that lets an in-flight request finish.
func TestStartServeGracefulStop(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	pid := i.PID()
	if !i.Running() || pid == 0 {
		t.Fatalf("Running=%v PID=%d after Start", i.Running(), pid)
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("X-Config = %q, want a", got)
	}
	workers, err := i.Workers(context.Background())
	if err != nil || len(workers) != 1 || workers[0].Old {
		t.Fatalf("Workers = %+v, %v; want one current worker", workers, err)
	}

	type result struct {
		body string
		err  error
	}
	slow := make(chan result, 1)
	go func() {
		resp, err := http.Get(e.url("/slow"))
		if err != nil {
			slow <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		slow <- result{string(b), err}
	}()
	<-e.slow // the request is inside HAProxy and the backend now

	began := time.Now()
	if err := i.Stop(context.Background()); err != nil {
		t.Fatalf("stop: %v", err)
	}
	took := time.Since(began)
	r := <-slow
	if r.err != nil || r.body != "slow done" {
		t.Fatalf("in-flight request during stop: body %q, err %v", r.body, r.err)
	}
	t.Logf("stop waited %s for the in-flight request", took.Round(time.Millisecond))
	if i.Running() {
		t.Fatal("Running after Stop")
	}
	// Reaped, not a zombie: the pid no longer exists at all.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("master %d after Stop: kill(0) = %v, want ESRCH", pid, err)
	}
	if c, err := net.DialTimeout("tcp", e.url("")[len("http://"):], time.Second); err == nil {
		c.Close()
		t.Fatal("frontend still accepts connections after Stop")
	}
}

// Test 3: a configuration that fails the check is never signalled; one that
// breaks after the check makes Reload fail while the old worker serves on.
func TestReloadRefusesBadConfig(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	t.Run("check fails, no signal", func(t *testing.T) { checkFailsNoSignal(t, e, i) })
	t.Run("broken after check, reload fails", func(t *testing.T) { brokenAfterCheck(t, e, i) })
	t.Run("passes check, cannot bind", func(t *testing.T) { passesCheckCannotBind(t, e, i) })
	t.Run("recovers on the next good config", func(t *testing.T) { recoversOnGoodConfig(t, e, i) })
}

func checkFailsNoSignal(t *testing.T, e *env, i *Instance) {
	ctx := context.Background()
	before := mustShowProc(t, i)
	e.write(e.config("b", "    bogus-directive here\n"))
	err := i.Reload(ctx)
	if !errors.Is(err, ErrCheckFailed) || !strings.Contains(err.Error(), "bogus-directive") {
		t.Fatalf("Reload = %v, want ErrCheckFailed carrying HAProxy's message", err)
	}
	if after := mustShowProc(t, i); after.master.Reloads != before.master.Reloads {
		t.Fatalf("master reloads %d -> %d: the bad config was signalled", before.master.Reloads, after.master.Reloads)
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q, want a", got)
	}
	if s := i.Stats(); s.ChecksFailed != 1 || s.ReloadsFailed != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func brokenAfterCheck(t *testing.T, e *env, i *Instance) {
	ctx := context.Background()
	before := mustShowProc(t, i)
	e.write(e.config("b", ""))
	i.afterCheck = func(staged string) {
		files, _ := filepath.Glob(filepath.Join(staged, "*.cfg"))
		for _, f := range files {
			_ = os.WriteFile(f, []byte(e.config("b", "    broken-after-check yes\n")), 0o600)
		}
	}
	err := i.Reload(ctx)
	i.afterCheck = nil
	if !errors.Is(err, ErrReloadFailed) || !strings.Contains(err.Error(), "broken-after-check") {
		t.Fatalf("Reload = %v, want ErrReloadFailed carrying HAProxy's message", err)
	}
	t.Logf("reload error: %v", err)
	after := mustShowProc(t, i)
	if after.master.FailedReloads == 0 || after.master.PID != before.master.PID {
		t.Fatalf("show proc after failed reload: %+v", after.master)
	}
	if cur := after.current(); len(cur) != 1 || cur[0].PID != before.current()[0].PID {
		t.Fatalf("workers after failed reload %+v, want the old one %+v", cur, before.current())
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q, want a (old worker)", got)
	}
	assertActiveHeader(t, i, "a") // a restart would load the last good set
	if s := i.Stats(); s.ReloadsFailed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func passesCheckCannotBind(t *testing.T, e *env, i *Instance) {
	ctx := context.Background()
	// `haproxy -c` does not bind, so a taken port only fails at load.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	e.write(e.config("b", "    bind "+taken.Addr().String()+"\n"))
	err = i.Reload(ctx)
	if !errors.Is(err, ErrReloadFailed) {
		t.Fatalf("Reload = %v, want ErrReloadFailed", err)
	}
	t.Logf("reload error: %v", err)
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q, want a", got)
	}
}

func recoversOnGoodConfig(t *testing.T, e *env, i *Instance) {
	e.write(e.config("b", ""))
	reload(t, i)
	if got := get(t, e.url("/")); got != "b" {
		t.Fatalf("serving %q, want b", got)
	}
	if st := mustShowProc(t, i); st.master.FailedReloads != 0 {
		t.Fatalf("failed reloads still %d after a good reload", st.master.FailedReloads)
	}
	assertActiveHeader(t, i, "b")
	s := i.Stats()
	t.Logf("stats %+v", s)
	if s.ReloadsOK != 1 || s.ReloadsFailed != 2 || s.ChecksFailed != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Test 4: kill -9 of the worker takes the master with it; the supervisor
// says so at once (OnExit, well before the restart's backoff) and starts
// a new one on the last good configuration.
func TestWorkerKilledSupervisorRestarts(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	exited := make(chan time.Time, 4)
	i := e.instanceWith(func() {
		select {
		case exited <- time.Now():
		default:
		}
	})
	start(t, i)
	oldMaster := i.PID()
	worker := mustShowProc(t, i).current()[0].PID
	// The renderer has moved on to a broken file: the restart must not read it.
	e.write("garbage\n")

	killed := time.Now()
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-exited:
		// The master notices its worker's death and exits; the supervisor
		// hears of it from the master's Wait, not from a poll.
		if took := at.Sub(killed); took > 500*time.Millisecond {
			t.Errorf("OnExit %s after the kill, want it as soon as the master exits", took)
		} else {
			t.Logf("OnExit %s after kill -9 of the worker", took.Round(time.Millisecond))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnExit not called within 10 s of the kill")
	}
	waitServing(t, i, e, oldMaster)
	t.Logf("serving again %s after kill -9 of worker %d", time.Since(killed).Round(time.Millisecond), worker)
	if s := i.Stats(); s.Restarts != 1 {
		t.Fatalf("stats %+v, want 1 restart", s)
	}
	if err := syscall.Kill(oldMaster, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("old master %d: kill(0) = %v, want ESRCH (reaped)", oldMaster, err)
	}
}

// waitServing waits until a master other than old runs and serves config a.
func waitServing(t *testing.T, i *Instance, e *env, old int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for time.Now().Before(deadline) {
		if pid := i.PID(); pid != 0 && pid != old {
			if resp, err := c.Get(e.url("/")); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 && resp.Header.Get("X-Config") == "a" {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("not serving again within 10s (PID %d, old %d)", i.PID(), old)
}

// Test 5: pier restarts; the new Instance adopts the running master instead
// of starting a second one, reloads it, supervises it, and stops it.
func TestAdoptAfterPierRestart(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	first := e.instance()
	start(t, first)
	pid := first.PID()
	first.Detach() // pier exits without touching HAProxy

	second := e.instance()
	start(t, second)
	if second.PID() != pid {
		t.Fatalf("adopted PID %d, want %d", second.PID(), pid)
	}
	if m := ourMasters(t, second.masterSock()); len(m) != 1 || m[0] != pid {
		t.Fatalf("masters on our socket: %v, want only %d", m, pid)
	}
	if changed, err := second.ConfigChanged(); err != nil || changed {
		t.Fatalf("ConfigChanged = %v, %v; want false (no reload needed)", changed, err)
	}
	e.write(e.config("b", ""))
	if changed, _ := second.ConfigChanged(); !changed {
		t.Fatal("ConfigChanged = false after the file changed")
	}
	reload(t, second)
	if got := get(t, e.url("/")); got != "b" {
		t.Fatalf("serving %q after reload of adopted master, want b", got)
	}
	if second.PID() != pid {
		t.Fatalf("reload changed the master pid %d -> %d", pid, second.PID())
	}
	if err := second.Stop(context.Background()); err != nil {
		t.Fatalf("stop adopted: %v", err)
	}
	waitGone(t, pid, 5*time.Second)
	if m := ourMasters(t, second.masterSock()); len(m) != 0 {
		t.Fatalf("masters left after Stop: %v", m)
	}
}

// The supervisor of an adopted master notices its death (it is not our
// child, so no Wait) and starts a new one.
func TestAdoptedMasterCrashRestarts(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	first := e.instance()
	start(t, first)
	first.Detach()
	second := e.instance()
	start(t, second)
	adopted := second.PID()
	worker := mustShowProc(t, second).current()[0].PID
	if err := syscall.Kill(worker, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitServing(t, second, e, adopted)
	if s := second.Stats(); s.Restarts != 1 {
		t.Fatalf("stats %+v", s)
	}
}

// Test 6: the runtime API through the worker's stats socket.
func TestRuntime(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	ctx := context.Background()
	worker := mustShowProc(t, i).current()[0].PID

	info, err := i.Runtime(ctx, e.statsSock(), "show info")
	if err != nil || !strings.Contains(info, "Name: HAProxy") || !strings.Contains(info, "Pid: "+strconv.Itoa(worker)) {
		t.Fatalf("show info = %q, %v", info, err)
	}
	state, err := i.Runtime(ctx, e.statsSock(), "show servers state be")
	if err != nil || !strings.Contains(state, " be 1 s1 127.0.0.1 ") {
		t.Fatalf("show servers state = %q, %v", state, err)
	}
	for _, bad := range []string{"show info; shutdown frontend fe", "show info\nshutdown frontend fe", "show info\r", ""} {
		if _, err := i.Runtime(ctx, e.statsSock(), bad); err == nil {
			t.Errorf("Runtime(%q) accepted", bad)
		}
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q after refused commands", got)
	}
}

func TestCheck(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(e.config("a", ""))
	if err := Check(ctx, "", []string{e.cfgPath}); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	e.write(e.config("a", "    nonsense\n"))
	err := Check(ctx, "", []string{e.cfgPath})
	if !errors.Is(err, ErrCheckFailed) || !strings.Contains(err.Error(), "nonsense") {
		t.Fatalf("invalid config: %v", err)
	}
	err = Check(ctx, filepath.Join(e.root, "no-such-haproxy"), []string{e.cfgPath})
	if err == nil || errors.Is(err, ErrCheckFailed) {
		t.Fatalf("missing binary: %v, want an error that is not ErrCheckFailed", err)
	}
}

func mustShowProc(t *testing.T, i *Instance) procStatus {
	t.Helper()
	st, err := showProc(context.Background(), i.masterSock())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// assertActiveHeader checks which configuration a restart would load.
func assertActiveHeader(t *testing.T, i *Instance, name string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(i.confLink(), "*.cfg"))
	if len(files) != 1 {
		t.Fatalf("active set %v, want one file", files)
	}
	b, _ := os.ReadFile(files[0])
	if !strings.Contains(string(b), "X-Config "+name+"\n") {
		t.Fatalf("active configuration is not %q:\n%s", name, b)
	}
}

// TestStopStale: a master left by a previous pier is stopped without a
// new one being started; with nothing running it is a no-op.
func TestStopStale(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	first := e.instance()
	start(t, first)
	pid := first.PID()
	first.Detach() // pier exits without touching HAProxy

	second := e.instance()
	if err := second.StopStale(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid, 5*time.Second)
	if second.Running() {
		t.Fatal("StopStale started haproxy")
	}
	if err := e.instance().StopStale(context.Background()); err != nil {
		t.Fatalf("StopStale with nothing running: %v", err)
	}
	if m := ourMasters(t, second.masterSock()); len(m) != 0 {
		t.Fatalf("masters left: %v", m)
	}
}

// TestRuntimeBatch: a batch runs over one connection, in order, each
// answer checked; the first refused answer stops the batch, so the
// commands after it never run.
func TestRuntimeBatch(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	ctx := context.Background()
	var answers []string
	record := func(cmd, answer string) error {
		answers = append(answers, answer)
		if strings.Contains(answer, "No such") {
			return errors.New(cmd + ": " + answer)
		}
		return nil
	}
	before := i.Stats().RuntimeConnections
	cmds := []string{"set server be/s1 weight 7", "set server be/s1 addr 127.0.0.1 port 9", "set server be/s1 addr " +
		strings.Split(e.backend.Listener.Addr().String(), ":")[0] + " port " + strconv.Itoa(e.backend.Listener.Addr().(*net.TCPAddr).Port)}
	if err := i.RuntimeBatch(ctx, e.statsSock(), cmds, record); err != nil {
		t.Fatal(err)
	}
	if n := i.Stats().RuntimeConnections - before; n != 1 {
		t.Fatalf("%d connections for one batch", n)
	}
	if len(answers) != 3 || answers[0] != "" || !strings.Contains(answers[1], "changed from") {
		t.Fatalf("answers %q", answers)
	}
	state, err := i.Runtime(ctx, e.statsSock(), "show servers state be")
	if err != nil || !strings.Contains(state, " be 1 s1 127.0.0.1 ") {
		t.Fatalf("show servers state = %q, %v", state, err)
	}
	answers = nil
	err = i.RuntimeBatch(ctx, e.statsSock(), []string{"set server be/nope state ready", "set server be/s1 weight 3"}, record)
	if err == nil || len(answers) != 1 {
		t.Fatalf("batch after a refused command: %v, answers %q", err, answers)
	}
	if w, _ := i.Runtime(ctx, e.statsSock(), "get weight be/s1"); !strings.HasPrefix(w, "7 ") {
		t.Fatalf("weight after a stopped batch: %q", w)
	}
	if err := i.RuntimeBatch(ctx, e.statsSock(), []string{"show info; shutdown frontend fe"}, record); err == nil {
		t.Fatal("a ';' in a batch command was accepted")
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q after the batches", got)
	}
}

// TestRestage: the files become the set a restart or an adoption starts
// from, with no reload; a set that fails the check is not taken.
func TestRestage(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	ctx := context.Background()
	e.write(e.config("b", ""))
	if changed, err := i.ConfigChanged(); err != nil || !changed {
		t.Fatalf("before Restage: changed %v, %v", changed, err)
	}
	if err := i.Restage(ctx); err != nil {
		t.Fatal(err)
	}
	if changed, err := i.ConfigChanged(); err != nil || changed {
		t.Fatalf("after Restage: changed %v, %v", changed, err)
	}
	if s := i.Stats(); s.ReloadsOK != 0 {
		t.Fatalf("Restage reloaded: %+v", s)
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q: Restage must not reload", got)
	}
	e.write(e.config("c", "    nonsense\n"))
	if err := i.Restage(ctx); !errors.Is(err, ErrCheckFailed) {
		t.Fatalf("bad set: %v", err)
	}
	if changed, _ := i.ConfigChanged(); !changed {
		t.Fatal("a refused set was taken")
	}
	// RestageFile trusts its caller's check of the one file it names: the
	// file replaces its copy in the active set, which stays the active
	// set (no new folder), without a check or a reload.
	if err := i.Restage(ctx); !errors.Is(err, ErrCheckFailed) {
		t.Fatalf("bad set again: %v", err)
	}
	e.write(e.config("b", ""))
	if err := i.Restage(ctx); err != nil {
		t.Fatal(err)
	}
	activeBefore, _ := os.Readlink(filepath.Join(i.cfg.Dir, "conf"))
	e.write(e.config("d", ""))
	if err := i.RestageFile(ctx, e.cfgPath); err != nil {
		t.Fatal(err)
	}
	if changed, err := i.ConfigChanged(); err != nil || changed {
		t.Fatalf("after RestageFile: changed %v, %v", changed, err)
	}
	if active, _ := os.Readlink(filepath.Join(i.cfg.Dir, "conf")); active != activeBefore {
		t.Fatalf("RestageFile staged a new set %s, want %s updated in place", active, activeBefore)
	}
	if s := i.Stats(); s.ReloadsOK != 0 || s.ChecksFailed != 2 {
		t.Fatalf("RestageFile reloaded or checked: %+v", s)
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q: RestageFile must not reload", got)
	}
	// The files still load: a reload serves d.
	if err := i.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, e.url("/")); got != "d" {
		t.Fatalf("after a reload: serving %q, want d", got)
	}
	// The reload made another active set: RestageFile reads that one (it
	// remembers a set's listing, not across sets), twice in a row.
	activeBefore, _ = os.Readlink(filepath.Join(i.cfg.Dir, "conf"))
	for _, body := range []string{"e", "f"} {
		e.write(e.config(body, ""))
		if err := i.RestageFile(ctx, e.cfgPath); err != nil {
			t.Fatal(err)
		}
		if changed, err := i.ConfigChanged(); err != nil || changed {
			t.Fatalf("after RestageFile of %s in the reloaded set: changed %v, %v", body, changed, err)
		}
		if active, _ := os.Readlink(filepath.Join(i.cfg.Dir, "conf")); active != activeBefore {
			t.Fatalf("RestageFile of %s staged a new set %s, want %s updated in place", body, active, activeBefore)
		}
	}

	// A file list that is not the active set's is staged whole.
	extra := filepath.Join(e.lbDir, "extra.conf")
	if err := os.WriteFile(extra, []byte("# nothing\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	i.SetConfigFiles([]string{e.cfgPath, extra})
	activeBefore, _ = os.Readlink(filepath.Join(i.cfg.Dir, "conf"))
	if err := i.RestageFile(ctx, e.cfgPath); err != nil {
		t.Fatal(err)
	}
	if active, _ := os.Readlink(filepath.Join(i.cfg.Dir, "conf")); active == activeBefore {
		t.Fatal("a new file list was not staged whole")
	}
	if changed, err := i.ConfigChanged(); err != nil || changed {
		t.Fatalf("after RestageFile of a new list: changed %v, %v", changed, err)
	}
}
