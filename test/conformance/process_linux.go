//go:build linux

package conformance

import "syscall"

// newProcAttr puts the child in its own process group and has the kernel
// send it SIGTERM if the test binary dies first (go test timeout, ^C),
// so no pier or echo process outlives the run.
func newProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
