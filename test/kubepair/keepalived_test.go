//go:build linux

package kubepair

import (
	"errors"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"pier.dev/pier/internal/lab"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/harness"
)

// TestKeepalivedKilled kills the holder's keepalived as a crash does:
// every keepalived process of the node stopped (SIGSTOP) and then killed
// (SIGKILL), so that its VRRP child neither sends priority 0 nor removes
// the addresses, as it does when only its parent dies. The peer takes
// over when its master-down timer ends (about 0.35 s); the agent sees its
// keepalived gone, removes the addresses it held and starts it again, as
// BACKUP. The holders of the VIP and FIP are sampled every 50 ms across
// both nodes: never two.
func TestKeepalivedKilled(t *testing.T) {
	w := newWorld(t)
	lb, err := w.waitLB(2*time.Minute, "placed on two nodes, one MASTER and one BACKUP reported", func(lb *model.LoadBalancer) bool {
		r := roles(lb)
		return lb.VIP != "" && lb.FIP != "" && len(r) == 2 &&
			(r[lb.Placement.Active] == model.VRRPMaster || r[lb.Placement.Standby] == model.VRRPMaster)
	})
	if err != nil {
		t.Fatal(err)
	}
	vip, fip := netip.MustParseAddr(lb.VIP), netip.MustParseAddr(lb.FIP)
	holder, other, _ := w.settled(t, vip)
	for _, a := range []netip.Addr{vip, fip} {
		if _, err := w.waitHolder(holder, a, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	hw := w.watchHolders(vip, fip)
	p := w.probe(vip, recoveryTimeout)
	time.Sleep(500 * time.Millisecond)
	fault, n, err := w.crashKeepalived(holder)
	if err != nil {
		p.Stop()
		hw.end()
		t.Fatal(err)
	}
	lastFrom, firstTo, moved, err := w.move(vip, holder, other, 3*time.Second)
	if err != nil {
		p.Stop()
		hw.end()
		t.Fatal(err)
	}
	if _, err := w.waitHolder(other, fip, time.Second); err != nil {
		t.Errorf("the FIP did not follow: %v", err)
	}
	time.Sleep(time.Second)
	samples := p.Stop()
	took := failover(t, "keepalived killed", samples, fault)
	// The killed node comes back as BACKUP (nopreempt): no second move.
	lb, err = w.waitRoles(20*time.Second, map[string]model.VRRPState{holder: model.VRRPBackup, other: model.VRRPMaster})
	// The sampling goes on for 2 s more: the restarted keepalived must
	// stay BACKUP, not take the addresses again.
	time.Sleep(2 * time.Second)
	held, double, first := hw.end()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("keepalived killed: %d processes on %s stopped then killed; VIP on %s alone after %s (no holder for %s); served again after %s; %s",
		n, holder, other, moved.Sub(fault).Round(time.Millisecond), gap(lastFrom, firstTo), took.Round(time.Millisecond), harness.Summary(samples))
	if double > 0 {
		t.Errorf("two holders in %d of %d samples (first %s)", double, held, first)
	}
	t.Logf("keepalived killed: holders of %s and %s sampled %d times (every 50 ms), %d with two; %s",
		vip, fip, held, double, describe(lb))
	released, times := w.agents[holder].lines(`keepalived exited; releasing its addresses and restarting it`)
	if len(released) == 0 {
		t.Fatalf("%s's agent did not log that its keepalived died", holder)
	}
	t.Logf("keepalived killed: %s's agent noticed %s after the kill: %s", holder,
		times[len(times)-1].Sub(fault.Truncate(time.Millisecond)).Round(time.Millisecond), released[len(released)-1])
	if len(lab.PidsIn(w.nodes[holder].NS, "keepalived")) == 0 {
		t.Errorf("no keepalived runs on %s after the restart", holder)
	}
	for _, a := range []netip.Addr{vip, fip} {
		if !w.holds(other, a) {
			t.Errorf("%s: holders %v after %s's keepalived came back, want %s alone", a, w.lab.Holders(a), holder, other)
		}
	}
}

// crashKeepalived stops every keepalived process of node, then kills
// them, and returns when it began: the fault time.
func (w *world) crashKeepalived(node string) (time.Time, int, error) {
	pids := lab.PidsIn(w.nodes[node].NS, "keepalived")
	if len(pids) == 0 {
		return time.Time{}, 0, errors.New("no keepalived runs on " + node)
	}
	// The fault: from here the node sends no advert.
	at := time.Now()
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return at, len(pids), nil
}
