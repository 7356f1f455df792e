//go:build linux

package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestDeferredCheckIsNiced: a check run at deferredNice the way a
// deferred reload runs it (atNiceness) runs at that niceness, an ordinary
// one at the caller's. The "HAProxy" here is a script that records the
// niceness it runs at.
func TestDeferredCheckIsNiced(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "nice")
	bin := filepath.Join(dir, "fake-haproxy")
	script := "#!/bin/sh\nawk '{print $19}' /proc/$$/stat > " + out + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	niceness := func(nice int) string {
		t.Helper()
		check := func() error { return Check(t.Context(), bin, []string{"x.cfg"}) }
		var err error
		if nice == 0 {
			err = check()
		} else {
			err = atNiceness(nice, check)
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	base := niceness(0)
	if base == strconv.Itoa(deferredNice) {
		t.Skipf("the test itself runs at niceness %s", base)
	}
	if got := niceness(deferredNice); got != strconv.Itoa(deferredNice) {
		t.Fatalf("deferred check ran at niceness %s (an ordinary one at %s), want %d", got, base, deferredNice)
	}
	if again := niceness(0); again != base {
		t.Fatalf("an ordinary check after a deferred one ran at niceness %s, want %s: a niced thread went back to the scheduler", again, base)
	}
}

// TestReloadDeferredRestoresPriority: after a deferred reload (as root,
// where the master's parse is niced too) the master and its new worker
// serve at niceness 0 again, and the new config serves.
func TestReloadDeferredRestoresPriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the master's priority is lowered only as root")
	}
	e := newEnv(t)
	e.write(e.config("a", ""))
	i := e.instance()
	start(t, i)
	e.write(e.config("b", ""))
	if err := i.ReloadDeferred(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := get(t, e.url("/")); got != "b" {
		t.Fatalf("serving %q after the deferred reload, want b", got)
	}
	st := mustShowProc(t, i)
	pids := []int{st.master.PID}
	for _, w := range st.current() {
		pids = append(pids, w.PID)
	}
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		// Fields after the command's closing parenthesis: state is the
		// first, niceness the 17th.
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if rest[16] != "0" {
			t.Errorf("pid %d runs at niceness %s after the deferred reload", pid, rest[16])
		}
	}
}
