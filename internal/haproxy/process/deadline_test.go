package process

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckDeadline: a `haproxy -c` that runs past its deadline is
// killed there, and the error says so and counts as a refused check.
// The binary is a script that records its pid and sleeps.
func TestCheckDeadline(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "haproxy")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "x.cfg")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := check(context.Background(), script, []string{cfg}, 300*time.Millisecond)
	took := time.Since(start)
	t.Logf("check returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrCheckTimeout) || !errors.Is(err, ErrCheckFailed) || !strings.Contains(err.Error(), "haproxy -c took longer than 300ms") {
		t.Fatalf("err %v, want a timeout that is a failed check", err)
	}
	if took > 3*time.Second {
		t.Fatalf("returned after %v, the deadline was 300ms", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if pid <= 0 || syscall.Kill(pid, 0) == nil {
		t.Fatalf("check process %d still runs", pid)
	}
}

// TestCheckDeadlineRealHAProxy: a configuration whose check is slow (a
// user at bcrypt cost 15: HAProxy hashes it while it checks, about 1.6
// s here) is killed at the deadline.
func TestCheckDeadlineRealHAProxy(t *testing.T) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		t.Skip("no haproxy")
	}
	cfg := filepath.Join(t.TempDir(), "slow.cfg")
	const hash = "$2b$15$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	if err := os.WriteFile(cfg, []byte("userlist u\n    user mallory password "+hash+"\nfrontend f\n    mode http\n    bind 127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := check(context.Background(), "", []string{cfg}, 200*time.Millisecond)
	took := time.Since(start)
	t.Logf("check returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrCheckTimeout) || took > time.Second {
		t.Fatalf("after %v: %v, want the check killed at 200ms", took, err)
	}
	if err := check(context.Background(), "", []string{cfg}, time.Minute); err != nil {
		t.Fatalf("the same check without a short deadline: %v", err)
	}
}

// TestReloadCheckCancelled: Reload's ctx cancels its check (a set nobody
// wants any more), at once, and the running worker serves on, with no
// check counted as failed; a cancellation after the check passed does
// not stop the reload, which completes.
func TestReloadCheckCancelled(t *testing.T) {
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	before := mustShowProc(t, i)
	// A user at bcrypt cost 15: HAProxy hashes it while it checks, about 1.6 s.
	const hash = "$2b$15$Zxl3U8oRi2N5aiTDsrx3S.kammLW6sEDyIg2Z1D6V1WYVoKl/lF2C"
	e.write(e.config("b", "") + "\nuserlist u\n    user mallory password " + hash + "\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	began := time.Now()
	err := i.Reload(ctx)
	took := time.Since(began)
	t.Logf("Reload returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrCheckFailed) || took > time.Second {
		t.Fatalf("after %v: %v, want the check cancelled at 200ms, not refused", took, err)
	}
	if s := i.Stats(); s.ChecksFailed != 0 || s.ReloadsFailed != 0 {
		t.Errorf("stats %+v: a cancelled check is no failure", s)
	}
	if after := mustShowProc(t, i); after.master.Reloads != before.master.Reloads {
		t.Errorf("master reloads %d -> %d: a cancelled set was signalled", before.master.Reloads, after.master.Reloads)
	}
	if got := get(t, e.url("/")); got != "a" {
		t.Fatalf("serving %q, want a", got)
	}

	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	i.afterCheck = func(string) { cancel() }
	defer func() { i.afterCheck = nil }()
	if err := i.Reload(ctx); err != nil {
		t.Fatalf("Reload cancelled after its check: %v, want the reload seen through", err)
	}
	if got := get(t, e.url("/")); got != "b" {
		t.Fatalf("serving %q, want b", got)
	}
}
