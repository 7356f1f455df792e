package process

import (
	"runtime"
	"syscall"
)

// atNiceness runs f on an OS thread of its own at the given niceness, and
// waits for it: on Linux niceness is per thread, and what f forks (the
// `haproxy -c` of a deferred reload) inherits it. The thread is never
// given back to the Go scheduler: it ends with its goroutine, so no other
// goroutine ever runs niced.
func atNiceness(nice int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), nice) // best effort
		done <- f()
	}()
	return <-done
}
