//go:build linux

package kubeapi

import "syscall"

// procAttr has the kernel kill the child if the test binary dies first
// (go test timeout, ^C), so no etcd or apiserver outlives the run. Its own
// process group keeps a terminal's ^C from reaching it before Stop does.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
