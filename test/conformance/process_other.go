//go:build unix && !linux

package conformance

import "syscall"

// newProcAttr puts the child in its own process group.
func newProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
