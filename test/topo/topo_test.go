//go:build linux

package topo

import (
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Hosts reach each other on the segment, nothing else, and the link switch
// cuts one off; everything is gone after the cleanup.
func TestTopology(t *testing.T) {
	var names []string
	t.Run("build", func(t *testing.T) {
		top := New(t, Options{Nodes: 2, Client: true})
		names = top.namespaces()
		// A TCP connect to a closed port is refused (RST) when the host is
		// reachable, and times out when it is not.
		reach := func(from *Host, to netip.Addr) bool {
			cmd := from.Command(t.Context(), "bash", "-c", "timeout 1 bash -c 'exec 3<>/dev/tcp/"+to.String()+"/9' 2>&1")
			out, _ := cmd.CombinedOutput()
			return strings.Contains(string(out), "refused")
		}
		if !reach(top.Client, top.Nodes[0].Addr) || !reach(top.Nodes[0], top.Nodes[1].Addr) {
			t.Fatal("hosts on the segment do not reach each other")
		}
		if reach(top.Client, netip.MustParseAddr("10.98.0.1")) {
			t.Fatal("an address off the segment was reachable")
		}
		if err := top.Nodes[1].SetLink(false); err != nil {
			t.Fatal(err)
		}
		if reach(top.Client, top.Nodes[1].Addr) {
			t.Fatal("a host whose link is down was reachable")
		}
		if err := top.Nodes[1].SetLink(true); err != nil {
			t.Fatal(err)
		}
		// Something running inside is killed by the cleanup.
		if err := top.Nodes[0].Command(t.Context(), "sleep", "60").Start(); err != nil {
			t.Fatal(err)
		}
	})
	time.Sleep(100 * time.Millisecond)
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, ns := range names {
		if strings.Contains(string(out)+"\n", ns+" ") || strings.Contains(string(out)+"\n", ns+"\n") {
			t.Fatalf("namespace %s left after cleanup", ns)
		}
	}
}
