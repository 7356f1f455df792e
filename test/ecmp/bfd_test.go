package ecmp

import (
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestECMPLinkCutBFD: the link cut of TestECMPWithBird with BFD between
// bird and the nodes: the cut node leaves the router's multipath route
// within BFD's detection time (300 ms) instead of the hold time (3 s), and
// new connections fail only while it is there.
func TestECMPLinkCutBFD(t *testing.T) {
	w := newWorldOf(t, 3, worldOptions{bfd: true})
	waitFor(t, 15*time.Second, "BFD up with the three nodes at bird", func() bool {
		return strings.Count(w.birdc("show", "bfd", "sessions"), " Up ") == 3
	})
	l := startLoad(time.Second)
	time.Sleep(200 * time.Millisecond)
	cut := time.Now()
	// Node 0 goes silent: nothing in, nothing out, its interface up.
	cmd := exec.Command("ip", "netns", "exec", nodeNS(0), "nft", "-f", "-")
	cmd.Stdin = strings.NewReader("table inet ecmp_cut {\n" +
		"  chain in { type filter hook prerouting priority -500; policy drop; }\n" +
		"  chain out { type filter hook output priority -500; policy drop; }\n}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cut: %v: %s", err, out)
	}
	w.waitPaths(2, 10*time.Second)
	took := time.Since(cut)
	time.Sleep(1500 * time.Millisecond)
	l.end()
	l.mu.Lock()
	servedAgain := l.lastFailure.Sub(cut)
	l.mu.Unlock()
	if l.failed.Load() == 0 {
		servedAgain = 0
	}
	t.Logf("node 0 cut off, BFD on: router at 2 next hops %s after the cut (nft's start included); last failed request %s after the cut; %d requests, %d failed",
		took.Round(time.Millisecond), servedAgain.Round(time.Millisecond), l.ok.Load(), l.failed.Load())
	// 300 ms of detection; nft's start and `ip route` on a loaded machine.
	if took > time.Second {
		t.Errorf("the router dropped the cut node %s after the cut, want about 300 ms with BFD", took)
	}
	// A request sent to the node in those 300 ms fails at its 1 s timeout.
	if servedAgain > 2*time.Second {
		t.Errorf("new connections failed until %s after the cut, want at most the detection time and one request's timeout", servedAgain)
	}
	newConnections(t, 300)
}
