package vrrp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCheckDeadline: a `keepalived -t` that runs past its deadline is
// killed there, and the error says so and counts as a refused check.
func TestCheckDeadline(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	script := filepath.Join(dir, "keepalived")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho $$ > "+pidFile+"\nexec sleep 60\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err := check(context.Background(), script, []byte("global_defs {\n}\n"), dir, 300*time.Millisecond)
	took := time.Since(start)
	t.Logf("check returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrCheckFailed) || !strings.Contains(err.Error(), "keepalived -t took longer than 300ms") || took > 3*time.Second {
		t.Fatalf("after %v: %v, want the check killed at 300ms", took, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || syscall.Kill(pid, 0) == nil {
		t.Fatalf("check process %d still runs", pid)
	}
}
