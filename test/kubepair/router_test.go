//go:build linux

package kubepair

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// routerRestartBound is how soon after the restarted bird answers the
// active node's routes must be back in the router's kernel and served:
// each agent dials every connect-retry (1 s, plus GoBGP's jitter of up to
// 1 s) from the moment it lost the session (the speaker replaces the
// peer, so GoBGP's fixed idle hold of 5 s does not apply), bird accepts at
// once (passive, a new process has no back-off), and the routes follow
// the OPEN within milliseconds (docs/bgp.md, sessions and restarts).
const routerRestartBound = 3 * time.Second

// TestRouterRestartBGP kills the gateway router (bird, SIGKILL) under
// traffic and starts it again: bird removes the routes its previous run
// left in the kernel, so the client has no route to the VIP until the
// agents' sessions are back. Every VIP and FIP must be advertised again by
// both nodes, the active one preferred, within routerRestartBound of bird
// answering, and each agent must log the session's loss and its return
// with the router's address, the state and how long it was down.
func TestRouterRestartBGP(t *testing.T) {
	if _, err := exec.LookPath("bird"); err != nil && os.Getenv("CI") != "true" {
		t.Skip("needs bird (apt-get install bird2)")
	}
	w := newWorldWith(t, nodeASN)
	lb, err := w.waitLB(2*time.Minute, "placed on two nodes, both advertising", func(lb *model.LoadBalancer) bool {
		r := bgpStates(lb)
		p := lb.Placement
		return p.Active != "" && p.Standby != "" && lb.VIP != "" && lb.FIP != "" &&
			r[p.Active] == model.BGPPreferred && r[p.Standby] == model.BGPAdvertised
	})
	if err != nil {
		t.Fatal(err)
	}
	vip, fip := netip.MustParseAddr(lb.VIP), netip.MustParseAddr(lb.FIP)
	active := lb.Placement.Active
	for _, a := range []netip.Addr{vip, fip} {
		if _, err := w.waitBest(a, active, 2, 20*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	for run := 1; run <= 2; run++ {
		if run > 1 {
			// A second loss within 10 s of the first keeps GoBGP's idle
			// hold (the speaker damps a flapping router).
			time.Sleep(10 * time.Second)
		}
		t.Run(fmt.Sprintf("restart %d", run), func(t *testing.T) {
			routerRestart(t, w, vip, fip, active)
		})
	}
}

// routerRestart is one kill and restart of bird, measured.
func routerRestart(t *testing.T, w *world, vip, fip netip.Addr, active string) {
	p := w.probe(vip, recoveryTimeout)
	routes := w.watchKernelRoute(vip)
	time.Sleep(500 * time.Millisecond)
	killed := time.Now()
	if err := w.bird.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	_ = w.bird.cmd.Wait()
	// Down for a second; its kernel routes stay meanwhile (nothing
	// removes them), so traffic still reaches the active node.
	time.Sleep(time.Second)
	if err := w.startBird(); err != nil {
		p.Stop()
		t.Fatal(err)
	}
	up := time.Now()
	// Both paths for each address (the active node preferred) in bird,
	// then the preferred one in the kernel.
	var inBird time.Time
	for _, a := range []netip.Addr{vip, fip} {
		at, err := w.waitBest(a, active, 2, 15*time.Second)
		if err != nil {
			p.Stop()
			t.Fatal(err)
		}
		if at.After(inBird) {
			inBird = at
		}
	}
	inKernel, err := w.waitKernelRoute(active, 5*time.Second, vip, fip)
	if err != nil {
		p.Stop()
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	samples := p.Stop()
	t.Logf("router restart: the kernel's route to %s since the kill: %s", vip, routes.end(killed))
	last, served := up, time.Duration(0)
	for _, s := range samples {
		if !s.OK && s.Start.After(last) {
			last = s.Start
		}
	}
	steady, ok := harness.Recovery(samples, last)
	if !ok {
		t.Fatalf("no request succeeded after bird's restart: %s", harness.Summary(samples))
	}
	served = last.Sub(up) + steady
	t.Logf("router restart: bird killed, started again %s later; both nodes' routes in bird %s and the preferred in its kernel %s after it answered; served again %s after it answered; %s",
		up.Sub(killed).Round(time.Millisecond), inBird.Sub(up).Round(time.Millisecond), inKernel.Sub(up).Round(time.Millisecond),
		served.Round(time.Millisecond), harness.Summary(samples))
	if took := inKernel.Sub(up); took > routerRestartBound {
		t.Errorf("the routes were back in the router's kernel %s after bird answered, bound %s", took, routerRestartBound)
	}
	if served > routerRestartBound {
		t.Errorf("served again %s after bird answered, bound %s", served, routerRestartBound)
	}
	for name, agent := range w.agents {
		w.checkSessionLog(t, name, agent, killed)
	}
}

// waitKernelRoute waits until the router's kernel routes each of addrs via
// node and returns when it saw that.
func (w *world) waitKernelRoute(node string, limit time.Duration, addrs ...netip.Addr) (time.Time, error) {
	via := "via " + w.nodes[node].Addr.String() + " "
	deadline := time.Now().Add(limit)
	for {
		all := true
		for _, a := range addrs {
			out, _ := exec.Command("ip", "-n", w.lab.Client.NS, "route", "show", a.String()).CombinedOutput()
			all = all && strings.Contains(string(out), via)
		}
		if all {
			return time.Now(), nil
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command("ip", "-n", w.lab.Client.NS, "route").CombinedOutput()
			return time.Time{}, fmt.Errorf("the router's kernel does not route %v via %s within %s:\n%s", addrs, node, limit, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// routeWatch notes every change of the router's kernel route to an
// address, sampled every 5 ms.
type routeWatch struct {
	stop    chan struct{}
	done    chan struct{}
	changes []string
}

func (w *world) watchKernelRoute(addr netip.Addr) *routeWatch {
	rw := &routeWatch{stop: make(chan struct{}), done: make(chan struct{})}
	start := time.Now()
	go func() {
		defer close(rw.done)
		last := "?"
		for {
			out, _ := exec.Command("ip", "-n", w.lab.Client.NS, "route", "show", addr.String()).CombinedOutput()
			now := strings.Join(strings.Fields(string(out)), " ")
			if now == "" {
				now = "none"
			}
			if now != last {
				rw.changes = append(rw.changes, fmt.Sprintf("%s@%s", now, time.Since(start).Round(time.Millisecond)))
				last = now
			}
			select {
			case <-rw.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return rw
}

// end stops the watch and says what the route was since the start.
func (rw *routeWatch) end(time.Time) string {
	close(rw.stop)
	<-rw.done
	return strings.Join(rw.changes, "; ")
}

var downFor = regexp.MustCompile(`down_for=(\S+)`)

// checkSessionLog checks that the agent logged, after since, its session
// with the router lost (a warning) and then back, with how long it was
// down.
func (w *world) checkSessionLog(t *testing.T, node string, agent *proc, since time.Time) {
	t.Helper()
	peer := "peer=" + w.lab.Client.Addr.String()
	since = since.Truncate(time.Millisecond)
	lost, lostAt := agent.lines("level=WARN", "bgp: session lost", peer, "state=down")
	back, backAt := agent.lines("bgp: session established again", peer, "state=established")
	var down, up string
	for i := range lost {
		if !lostAt[i].Before(since) {
			down = lost[i]
			break
		}
	}
	for i := range back {
		if !backAt[i].Before(since) {
			up = back[i]
			break
		}
	}
	if down == "" || up == "" {
		t.Errorf("%s's agent did not log its session with the router lost and back since %s:\n%s",
			node, since.Format(time.StampMilli), agent.tail(30))
		return
	}
	m := downFor.FindStringSubmatch(up)
	if d, err := time.ParseDuration(strings.Trim(safeGroup(m), `"`)); err != nil || d <= 0 || d > time.Since(since) {
		t.Errorf("%s's agent: the session's return says down_for=%q, want the time since the kill at most: %s", node, safeGroup(m), up)
	}
	t.Logf("%s:\n%s\n%s", node, down, up)
}

func safeGroup(m []string) string {
	if len(m) < 2 {
		return ""
	}
	return m[1]
}
