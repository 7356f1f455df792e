package process

import (
	"fmt"
	"path/filepath"
	"syscall"
)

// inNetnsOf checks that pid runs in the named network namespace (none:
// in ours), so an agent whose namespace setting changed does not adopt a
// master that listens in the wrong one.
func inNetnsOf(pid int, name string) error {
	want := "/proc/self/ns/net"
	if name != "" {
		want = filepath.Join("/run/netns", name)
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
