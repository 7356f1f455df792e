//go:build !linux

package process

// atNiceness runs f: off Linux, priority is per process.
func atNiceness(_ int, f func() error) error { return f() }
