//go:build linux

package topo

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The wrapper's part: New builds the hosts asked for under the pt<pid>-
// prefix, and the test's cleanup removes them, processes first. What the
// network itself does (reachability, isolation, SetLink) is tested in
// internal/lab.
func TestTopology(t *testing.T) {
	var names []string
	var sleep *exec.Cmd
	t.Run("build", func(t *testing.T) {
		top := New(t, Options{Nodes: 2, Client: true})
		names = top.namespaces()
		prefix := "pt" + strconv.Itoa(os.Getpid()) + "-"
		want := []string{prefix + "n0", prefix + "n1", prefix + "c", prefix + "sw"}
		if !slices.Equal(names, want) || top.Switch != prefix+"sw" {
			t.Fatalf("namespaces = %v, switch %s; want %v", names, top.Switch, want)
		}
		for _, h := range append(slices.Clone(top.Nodes), top.Client) {
			if !Subnet.Contains(h.Addr) || !h.Has(h.Addr) {
				t.Errorf("%s: address %s not on eth0", h.Name, h.Addr)
			}
		}
		if got := top.Holders(top.Nodes[1].Addr); !slices.Equal(got, []string{"n1"}) {
			t.Errorf("Holders(%s) = %v, want [n1]", top.Nodes[1].Addr, got)
		}
		// Something running inside is killed by the cleanup. ip netns exec
		// enters the namespace after Start returns: wait until it has.
		// Not t.Context(): its end would kill the process before the
		// cleanup could show that it does.
		sleep = top.Nodes[0].Command(context.Background(), "sleep", "60")
		if err := sleep.Start(); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			out, _ := exec.Command("ip", "netns", "pids", top.Nodes[0].NS).Output()
			if slices.Contains(strings.Fields(string(out)), strconv.Itoa(sleep.Process.Pid)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("sleep never showed up in the namespace")
			}
		}
	})
	if sleep != nil && sleep.Process != nil {
		done := make(chan error, 1)
		go func() { done <- sleep.Wait() }()
		select {
		case err := <-done:
			var exitErr *exec.ExitError
			if !errors.As(err, &exitErr) {
				t.Errorf("sleep in the topology: %v, want killed by the cleanup", err)
			}
		case <-time.After(5 * time.Second):
			_ = sleep.Process.Kill()
			t.Error("a process in the topology survived the cleanup")
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range names {
		if slices.Contains(strings.Fields(string(out)), ns) {
			t.Fatalf("namespace %s left after cleanup", ns)
		}
	}
}
