//go:build !linux

package harness

import "syscall"

func pierProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
