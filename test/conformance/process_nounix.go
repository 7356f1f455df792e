//go:build !unix

package conformance

import (
	"errors"
	"syscall"
)

// The files cluster needs process groups; pier itself only runs on Linux.
func newProcAttr() *syscall.SysProcAttr { return nil }
func terminate(int) error               { return errors.ErrUnsupported }
func killGroup(int) error               { return errors.ErrUnsupported }
