// Package netnsdo is pier's one way into a named network namespace
// (/run/netns/NAME, as `ip netns add` makes them):
//
//   - Do runs a function inside one without a process: the calling
//     goroutine's OS thread enters it and comes back. Sockets opened
//     inside stay in that namespace: the agent reads a node's addresses
//     and tests dial from a client host this way.
//   - The address, local route and neighbour functions (netlink.go) read
//     and change a namespace over netlink, inside Do, without forking
//     ip(8).
//   - Command runs a program inside one (HAProxy, nft, a test's curl).
//
// CheckName is the rule every namespace name passes first.
package netnsdo

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"

	"golang.org/x/sys/unix"
)

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// CheckName validates a network namespace name; "" (none: the caller's
// own) is valid. A name is what ip netns takes, short, with nothing a
// command line or a path could read as more than a name.
func CheckName(name string) error {
	if name == "" || namePattern.MatchString(name) {
		return nil
	}
	return fmt.Errorf("network namespace %q: want %s", name, namePattern)
}

// Do runs f on an OS thread moved into network namespace name, and
// moves the thread back afterwards. The thread stays locked while it is
// in the other namespace, so no other goroutine ever runs there.
func Do(name string, f func() error) error {
	if name == "" {
		return f()
	}
	if err := CheckName(name); err != nil {
		return err
	}
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("open own network namespace: %w", err)
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	ferr := f()
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread is stuck in the other namespace: keep it locked so
		// that it exits with this goroutine instead of serving others.
		return fmt.Errorf("leave network namespace %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	return ferr
}

// Enter moves the calling goroutine's thread into network namespace name
// for good: it locks the thread, which never comes back and ends with the
// goroutine. For a loop that must open its sockets there (a BGP
// speaker's listener) and runs until its process or server stops.
func Enter(name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	target, err := os.Open(filepath.Join("/run/netns", name))
	if err != nil {
		return fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()
	runtime.LockOSThread()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("enter network namespace %s: %w", name, err)
	}
	return nil
}
