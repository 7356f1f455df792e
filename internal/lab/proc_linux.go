//go:build linux

package lab

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillIn kills every process in the named namespace with SIGKILL, waits
// up to a second for them to go, and returns their pids. SIGKILL at once:
// whatever runs in a namespace being torn down has no one left to talk
// to, and a polite stop would only delay the teardown.
func KillIn(ns string) []int {
	nsPath := filepath.Join(runDir, ns)
	pids := pidsIn(nsPath)
	if len(pids) == 0 {
		return nil
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Wait briefly so that the namespace's addresses are free when the
	// caller deletes it or builds another.
	for range 50 {
		if len(pidsIn(nsPath)) == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return pids
}

// pidsIn lists the processes whose network namespace is the file nsPath,
// this process excepted.
func pidsIn(nsPath string) []int {
	var ns syscall.Stat_t
	if syscall.Stat(nsPath, &ns) != nil {
		return nil
	}
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && st.Dev == ns.Dev && st.Ino == ns.Ino {
			pids = append(pids, pid)
		}
	}
	return pids
}

// RemoveStale deletes every namespace named prefix+"<pid>-…" whose pid is
// no longer running, after killing what still runs inside it: the
// leftovers of a process that died without cleaning up (SIGKILL, go
// test's hard timeout). Namespaces of live pids, this one included, are
// left alone.
func RemoveStale(prefix string) {
	entries, _ := os.ReadDir(runDir)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		KillIn(e.Name())
		_ = ip("netns", "delete", e.Name())
	}
}

// PidsIn lists the processes named comm (as in /proc/PID/comm, e.g.
// "haproxy") that run in the named namespace.
func PidsIn(ns, comm string) []int {
	var out []int
	for _, pid := range pidsIn(filepath.Join(runDir, ns)) {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "comm"))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			out = append(out, pid)
		}
	}
	return out
}
