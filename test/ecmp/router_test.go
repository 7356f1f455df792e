//go:build linux

package ecmp

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// routerRestartBound is how soon after bird answers again every node's
// route must be back in the router's kernel: the speaker dials every
// connect-retry (1 s, bgp.connectRetry, plus GoBGP's jitter of up to
// 1 s) from the moment it lost the session (the peer is replaced, so
// GoBGP's idle hold of 5 s does not apply), bird accepts at once
// (passive, no back-off as a new process) and the routes follow the OPEN
// within milliseconds.
const routerRestartBound = 3 * time.Second

// TestRouterRestartECMP kills the gateway router's bird with SIGKILL
// under load and starts it again: every node's route must be back in the
// router's kernel table within routerRestartBound of bird answering, new
// connections served again, and each node must log the session's loss
// and its return with the peer, the state and how long it was down.
// A second restart right after is damped: the speakers wait GoBGP's idle
// hold (5 s) before they dial, as for a router whose sessions flap.
func TestRouterRestartECMP(t *testing.T) {
	w := newWorld(t, 3)
	t.Run("restart", func(t *testing.T) {
		back, failed, lastFailure := w.routerRestart(t)
		if back > routerRestartBound {
			t.Errorf("the routes were back in the router's kernel %s after bird answered, bound %s", back, routerRestartBound)
		}
		if failed > 0 && lastFailure > routerRestartBound {
			t.Errorf("new connections failed until %s after bird answered, bound %s", lastFailure, routerRestartBound)
		}
	})
	t.Run("a second restart at once is damped", func(t *testing.T) {
		back, _, _ := w.routerRestart(t)
		if back < 3*time.Second {
			t.Errorf("the routes were back %s after bird answered: the speakers dialled again at once, a flapping router would be tried every second", back)
		}
	})
}

// routerRestart kills bird under load, starts it again a second later
// and returns how long after it answered the 3 routes were back in its
// kernel, how many requests failed and when the last failure was.
func (w *world) routerRestart(t *testing.T) (back time.Duration, failed int64, lastFailure time.Duration) {
	l := startLoad(time.Second)
	time.Sleep(300 * time.Millisecond)

	killed := time.Now()
	if err := w.bird.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = w.bird.Wait()
	// What the router's kernel keeps while bird is gone: its routes stay
	// (nothing removes them), so traffic keeps going to the nodes.
	time.Sleep(time.Second)
	kept := len(w.paths())

	w.runBird()
	up := time.Now()
	var birdPaths, kernelAt time.Time
	timeline := []string{}
	last := ""
	deadline := up.Add(15 * time.Second)
	for time.Now().Before(deadline) {
		k, b := len(w.paths()), birdRoutes(w)
		now := fmt.Sprintf("kernel %d, bird %d", k, b)
		if now != last {
			timeline = append(timeline, fmt.Sprintf("+%s %s", time.Since(up).Round(time.Millisecond), now))
			last = now
		}
		if b == 3 && birdPaths.IsZero() {
			birdPaths = time.Now()
		}
		if b == 3 && k == 3 {
			kernelAt = time.Now()
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	l.end()
	l.mu.Lock()
	lastFailed := l.lastFailure
	l.mu.Unlock()
	t.Logf("bird killed; after 1 s its kernel route kept %d next hops; restarted %s after the kill; timeline since it answered: %s",
		kept, up.Sub(killed).Round(time.Millisecond), strings.Join(timeline, "; "))
	if kernelAt.IsZero() {
		t.Fatalf("the router's route has not its 3 next hops again 15 s after bird restarted:\n%s", w.birdc("show", "protocols"))
	}
	served := "no request failed"
	if l.failed.Load() > 0 {
		served = fmt.Sprintf("%d failed, the last %s after bird answered", l.failed.Load(), lastFailed.Sub(up).Round(time.Millisecond))
	}
	t.Logf("router restart: the 3 routes in bird %s and in its kernel %s after bird answered (%s after the kill); %d requests, %s",
		birdPaths.Sub(up).Round(time.Millisecond), kernelAt.Sub(up).Round(time.Millisecond), kernelAt.Sub(killed).Round(time.Millisecond),
		l.ok.Load(), served)
	newConnections(t, 100)
	for i := range 3 {
		checkSessionLog(t, w.nodeLog(i), routerAddr(i), killed)
	}
	return kernelAt.Sub(up), l.failed.Load(), lastFailed.Sub(up)
}

var birdRouteRE = regexp.MustCompile(`unicast \[`)

// birdRoutes counts the routes bird has for the VIP.
func birdRoutes(w *world) int {
	return len(birdRouteRE.FindAllString(w.birdc("show", "route", "for", vip, "all"), -1))
}

var logTimeRE = regexp.MustCompile(`^time=(\S+)`)

var downForRE = regexp.MustCompile(`down_for=(\S+)`)

// checkSessionLog checks a node's log says, after since, that its
// session with peer was lost and came back, and how long it was down.
func checkSessionLog(t *testing.T, path, peer string, since time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lost, back string
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.Contains(line, "peer="+peer+" ") {
			continue
		}
		// slog's text handler begins every line with its time.
		if m := logTimeRE.FindStringSubmatch(line); m == nil {
			continue
		} else if at, err := time.Parse(time.RFC3339Nano, m[1]); err != nil || at.Before(since.Truncate(time.Millisecond)) {
			continue
		}
		switch {
		case strings.Contains(line, "level=WARN") && strings.Contains(line, "session lost") && strings.Contains(line, "state=down"):
			lost = line
		case lost != "" && strings.Contains(line, "session established again") && strings.Contains(line, "state=established"):
			back = line
		}
	}
	if lost == "" || back == "" {
		t.Fatalf("%s: no session lost and then back for peer %s:\n%s", path, peer, b)
	}
	m := downForRE.FindStringSubmatch(back)
	if m == nil {
		t.Fatalf("%s: the session's return does not say how long it was down: %s", path, back)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil || d <= 0 || d > time.Since(since) {
		t.Errorf("%s: down_for=%s, want the time since the kill at most (%s)", path, m[1], time.Since(since).Round(time.Millisecond))
	}
	t.Logf("%s\n%s", lost, back)
}
