//go:build linux

package harness

import "syscall"

// pierProcAttr gives pier its own process group (a terminal's ^C reaches
// it through Stop, not before) and has the kernel send it SIGTERM if the
// test binary dies first (go test's timeout, a killed benchmark): pier
// then stops its HAProxy processes itself, where SIGKILL would leave them
// serving, holding their ports, under the next run.
func pierProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
