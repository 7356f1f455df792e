//go:build unix

package conformance

import "syscall"

// terminate sends SIGTERM to the process alone: it gets the chance to stop
// its own children in order (pier drains HAProxy).
func terminate(pid int) error { return syscall.Kill(pid, syscall.SIGTERM) }

// killGroup kills every process left in the group pid leads.
func killGroup(pid int) error { return syscall.Kill(-pid, syscall.SIGKILL) }
