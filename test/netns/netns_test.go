//go:build linux

package netns

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Main(m, Options{Prefixes: []netip.Prefix{PodPrefix, VIPPrefix}})
}

// helperEnv makes TestHelperProcess act instead of skipping; helperOut is
// the file where it reports.
const (
	helperEnv = "NETNS_TEST_HELPER"
	helperOut = "NETNS_TEST_HELPER_OUT"
)

func TestInsideFreshNamespace(t *testing.T) {
	if !Inside() {
		t.Fatal("Inside() = false in a test run by Main")
	}
	if !strings.HasPrefix(Name(), namePrefix+strconv.Itoa(os.Getppid())) {
		// ip netns exec execs in place, so our parent is the outer binary.
		t.Errorf("Name() = %q, want %s<parent pid>-...", Name(), namePrefix)
	}
	if sameFile("/proc/self/ns/net", "/proc/1/ns/net") {
		t.Error("same network namespace as pid 1")
	}
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	if len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
		t.Fatalf("interfaces = %v, want only lo, up", ifaces)
	}
}

// Child processes inherit the namespace: ip run from here sees only lo, no
// default route, and no route to an outside address. ip route get is a
// lookup only; nothing is sent.
func TestNoWayOut(t *testing.T) {
	links := run(t, "ip", "-o", "link", "show")
	if n := strings.Count(links, "\n"); n != 1 || !strings.Contains(links, ": lo:") {
		t.Errorf("ip link in a child process:\n%s\nwant only lo", links)
	}
	for _, family := range []string{"-4", "-6"} {
		routes := run(t, "ip", family, "route", "show", "table", "all")
		for line := range strings.SplitSeq(routes, "\n") {
			if strings.HasPrefix(line, "default") || (line != "" && !strings.Contains(line, "dev lo")) {
				t.Errorf("ip %s route: %q leads out", family, line)
			}
		}
	}
	out, err := exec.Command("ip", "route", "get", "192.0.2.1").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unreachable") {
		t.Errorf("ip route get 192.0.2.1 = %q, %v; want Network is unreachable", out, err)
	}
}

func TestPrefixAddressesAreLocal(t *testing.T) {
	for _, addr := range []string{"10.244.3.7", "10.244.255.254", "10.250.0.10", "127.0.0.1", "127.3.4.5"} {
		t.Run(addr, func(t *testing.T) { roundTrip(t, addr) })
	}
	// Outside the prefixes nothing is local: the negative proves the
	// prefixes, not some catch-all, make the addresses above work.
	if ln, err := net.Listen("tcp", "10.245.0.1:0"); err == nil {
		ln.Close()
		t.Fatal("10.245.0.1 is bindable; only the configured prefixes should be")
	} else if !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("listen 10.245.0.1: %v, want EADDRNOTAVAIL", err)
	}
}

// roundTrip listens on addr, connects to it and echoes a few bytes. (The
// client's source address is the prefix's first address, the route's src,
// not addr: not checked, only noted for whoever reads logs.)
func roundTrip(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, "0"))
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
	}()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// TestExitStatusAndCleanup runs this binary from the top, as go test would:
// the exit status passes through and the namespace it made is gone after.
func TestExitStatusAndCleanup(t *testing.T) {
	outer, report := startNested(t, "exit")
	err := outer.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 7 {
		t.Fatalf("nested run: %v, want exit status 7", err)
	}
	name := readReport(t, report)[0]
	if !strings.HasPrefix(name, namePrefix+strconv.Itoa(outer.Process.Pid)+"-") {
		t.Errorf("nested namespace %q, want %s%d-...", name, namePrefix, outer.Process.Pid)
	}
	assertGone(t, name)
}

// TestSignalCleansUp: SIGTERM to the outer binary ends the test binary and
// what it started in the namespace (even in another process group), and the
// namespace is deleted.
func TestSignalCleansUp(t *testing.T) {
	outer, report := startNested(t, "hang")
	var lines []string
	for deadline := time.Now().Add(30 * time.Second); len(lines) < 2; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("nested run did not report within 30 s")
		}
		lines = readReportIfThere(report)
	}
	name, sleeper := lines[0], lines[1]
	if err := outer.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := outer.Wait()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("nested run: %v, want exit status %d", err, 128+int(syscall.SIGTERM))
	}
	pid, _ := strconv.Atoi(sleeper)
	if alive(pid) {
		t.Errorf("process %d started in the namespace survived", pid)
	}
	assertGone(t, name)
}

// TestHelperProcess is the nested test binary's body, not a test.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper for TestExitStatusAndCleanup and TestSignalCleansUp")
	}
	report := []string{Name()}
	if mode == "hang" {
		// Its own group, so only the namespace sweep can end it.
		sleep := exec.Command("sleep", "300")
		sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		report = append(report, strconv.Itoa(sleep.Process.Pid))
	}
	if err := os.WriteFile(os.Getenv(helperOut), []byte(strings.Join(report, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	if mode == "hang" {
		select {}
	}
	os.Exit(7)
}

// startNested starts this test binary afresh (outside-mode: no marker) in
// its own process group, running only TestHelperProcess in mode.
func startNested(t *testing.T, mode string) (*exec.Cmd, string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.Command(exe, "-test.run=^TestHelperProcess$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvName+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, helperEnv+"="+mode, helperOut+"="+report)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if t.Failed() {
			t.Logf("nested run output:\n%s", stderr.String())
		}
	})
	return cmd, report
}

func readReport(t *testing.T, path string) []string {
	t.Helper()
	lines := readReportIfThere(path)
	if len(lines) == 0 {
		t.Fatalf("nested run wrote no report to %s", path)
	}
	return lines
}

func readReportIfThere(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\n")
}

func assertGone(t *testing.T, name string) {
	t.Helper()
	if name == "" {
		t.Fatal("nested run reported no namespace name")
	}
	if _, err := os.Stat(filepath.Join(runDir, name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("namespace %s still exists after the run (stat: %v)", name, err)
	}
}

// alive treats a zombie as dead: a reparented child may wait to be reaped.
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return !strings.HasPrefix(rest, "Z")
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
