package netnsdo

import (
	"context"
	"os/exec"
)

// Command returns program name with args to run inside network namespace
// ns, or as it is when ns is "". `ip netns exec` enters the namespace and
// then execs the program, so the process started is the program itself:
// its pid is the one the command reports and Wait waits for, and HAProxy's
// master stays in the namespace when it re-executes on a reload. ns must
// pass CheckName, or the command fails to start.
func Command(ctx context.Context, ns, name string, args ...string) *exec.Cmd {
	if ns == "" {
		return exec.CommandContext(ctx, name, args...)
	}
	if err := CheckName(ns); err != nil {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Err = err // what Start returns: the program never runs
		return cmd
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, name}, args...)...)
}
