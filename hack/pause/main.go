// Command pause is pier's sandbox ("pause") image program: the first
// process of every pod, which holds the pod's namespaces open. It does
// nothing but wait: it exits 0 on SIGINT or SIGTERM and, because it is
// PID 1 of the pod when the PID namespace is shared, reaps every zombie
// child it inherits on SIGCHLD. Standard library only, built static.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "-h" || os.Args[1] == "--help") {
		fmt.Fprintln(os.Stderr, "usage: pause (blocks until SIGINT or SIGTERM; reaps children)")
		return
	}
	if os.Getpid() != 1 {
		// The kubelet's pause runs as PID 1; elsewhere it still works, but
		// orphans are reaped by the real init, not by us.
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	// A buffered channel so a signal arriving while we reap is not lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		switch sig {
		case syscall.SIGCHLD:
			reap()
		default:
			fmt.Fprintf(os.Stderr, "pause: shutting down on %v\n", sig)
			os.Exit(0)
		}
	}
}

// reap collects every exited child without blocking. One SIGCHLD can
// stand for several exits, so it loops until none is left.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || pid <= 0 {
			return // ECHILD (no children) or none has exited yet
		}
	}
}
