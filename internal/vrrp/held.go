package vrrp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Held returns the addresses configured on iface, read over netlink in
// network namespace netns ("" for the caller's own). It is cheap (one
// netlink dump, no process): the agent calls it every 50 ms to learn
// which addresses this node holds, which is what MASTER means.
func Held(netns, iface string) (map[netip.Addr]bool, error) {
	var out map[netip.Addr]bool
	err := inNetns(netns, func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return err
		}
		out = make(map[netip.Addr]bool, len(addrs))
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					out[ip.Unmap()] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	return out, nil
}

// inNetns runs f on an OS thread moved into network namespace name, and
// moves the thread back afterwards. The thread stays locked while it is
// in the other namespace, so no other goroutine ever runs there.
func inNetns(name string, f func() error) error {
	if name == "" {
		return f()
	}
	if !namePattern.MatchString(name) {
		return fmt.Errorf("network namespace %q: want %s", name, namePattern)
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
