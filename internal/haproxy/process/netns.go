package process

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
)

// netnsName is what CheckNetns accepts: a name ip netns takes, short, and
// with nothing a command line or a path could read as more than a name.
var netnsName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// netnsDir is where ip netns keeps its named namespaces.
const netnsDir = "/run/netns"

// CheckNetns validates a network namespace name; "" (none) is valid.
func CheckNetns(name string) error {
	if name == "" || netnsName.MatchString(name) {
		return nil
	}
	return errors.New("network namespace name must match " + netnsName.String())
}

// inNetns returns cmd run by `ip netns exec name`. ip enters the
// namespace and then execs the command, so the process it starts is
// HAProxy itself: its pid is the one cmd reports and Wait waits for, and
// when the master re-executes on a reload it stays in the namespace.
func inNetns(name string, cmd *exec.Cmd) *exec.Cmd {
	args := append([]string{"netns", "exec", name}, cmd.Args...)
	return exec.Command("ip", args...)
}

// inNetnsOf checks that pid runs in the named network namespace (none:
// in ours), so an agent whose namespace setting changed does not adopt a
// master that listens in the wrong one.
func inNetnsOf(pid int, name string) error {
	want := "/proc/self/ns/net"
	if name != "" {
		want = filepath.Join(netnsDir, name)
	}
	var got, ns syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &got); err != nil {
		return fmt.Errorf("network namespace of pid %d: %w", pid, err)
	}
	if err := syscall.Stat(want, &ns); err != nil {
		return fmt.Errorf("network namespace %s: %w", want, err)
	}
	if got.Dev != ns.Dev || got.Ino != ns.Ino {
		return fmt.Errorf("it runs in another network namespace than %q; stop it to let a new one start", name)
	}
	return nil
}
