//go:build linux

package vrrp

import (
	"io"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"pier.dev/pier/test/topo"
)

func TestStateLogLines(t *testing.T) {
	var s stateLog
	s.reset("", 0)
	s.take([]byte("Fri Nov 27 00:54:47 2026: Starting Keepalived v2.2.7 (01/16,2022)\n" +
		"Fri Nov 27 00:54:47 2026: (vr1): entering FAULT state (tracked file track_vr1 has status -254)\n" +
		"Fri Nov 27 00:54:47 2026: (vr1) entering FAULT state\n" +
		"Fri Nov 27 00:54:47 2026: (vr2) Entering BACKUP STATE (init)\n" +
		"Fri Nov 27 00:54:48 2026: (vr2) Entering MAS"))
	if s.states["vr1"] != "FAULT" || s.states["vr2"] != "BACKUP" {
		t.Fatalf("states %v, want vr1 FAULT, vr2 BACKUP (the unended line not taken yet)", s.states)
	}
	s.take([]byte("TER STATE\nFri Nov 27 00:54:48 2026: (vr1): tracked file track_vr1 leaving FAULT state\n" +
		"Fri Nov 27 00:54:48 2026: (vr1) Entering BACKUP STATE\n"))
	if s.states["vr1"] != "BACKUP" || s.states["vr2"] != "MASTER" {
		t.Fatalf("states %v, want vr1 BACKUP, vr2 MASTER", s.states)
	}
	s.take([]byte("Fri Nov 27 00:54:49 2026: Netlink reports eth0 down\n"))
	if !s.down["eth0"] {
		t.Fatal("eth0 reported down, not recorded")
	}
	s.take([]byte("Fri Nov 27 00:54:50 2026: Netlink reports eth0 up\n"))
	if s.down["eth0"] {
		t.Fatal("eth0 reported up again, still recorded down")
	}
	s.take([]byte("Fri Nov 27 00:55:00 2026: Starting Keepalived v2.2.7 (01/16,2022)\n"))
	if len(s.states) != 0 {
		t.Fatalf("a new run kept the old states %v", s.states)
	}
}

// TestReconcileLostReload: a real keepalived that did not take a reload
// (the config file changed, no SIGHUP arrived) runs without the new
// instance; Reconcile sees that the instance's gate is open while
// keepalived never logged a state for it, waits stateGrace, reloads, and
// the instance takes its address.
func TestReconcileLostReload(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 2})
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	k, err := NewKeepalived("", top.Nodes[0].NS, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(t.Context()) })
	second := netip.MustParseAddr("10.99.1.11")
	one := pairConfig(t.TempDir(), top, 0)
	if err := k.Apply(t.Context(), one); err != nil {
		t.Fatal(err)
	}
	if err := k.SetHealthy("pair-a-b", true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "keepalived logs the first instance's state", 3*time.Second, func() bool {
		return agrees(k.State("pair-a-b"), true)
	})

	// The lost reload: the config names a second instance, keepalived
	// was not told.
	two := one
	in := one.Instances[0]
	in.Name, in.RouterID, in.Addresses = "pair-a-c", 43, []netip.Addr{second}
	two.Instances = append([]Instance{one.Instances[0]}, in)
	out, err := Render(two)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(two.confPath(), out, 0o600); err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	k.cfg = two
	k.mu.Unlock()
	if err := k.SetHealthy("pair-a-c", true); err != nil {
		t.Fatal(err)
	}
	opened := time.Now()
	for time.Since(opened) < stateGrace-200*time.Millisecond {
		if err := k.Reconcile(time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := k.Nudges(); n != 0 {
		t.Fatalf("reloaded %d times within the grace", n)
	}
	took := waitFor(t, "the missing instance running and holding its address", 5*time.Second, func() bool {
		if err := k.Reconcile(time.Now()); err != nil {
			t.Fatal(err)
		}
		return agrees(k.State("pair-a-c"), true) && top.Nodes[0].Has(second)
	})
	if n := k.Nudges(); n != 1 {
		t.Fatalf("%d reloads, want 1; log:\n%s", n, readLog(two))
	}
	t.Logf("the lost instance runs %s after the grace", took)
	// The first instance went on: it agrees, and no more reloads follow.
	for range 10 {
		if err := k.Reconcile(time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !agrees(k.State("pair-a-b"), true) || k.Nudges() != 1 {
		t.Fatalf("after the repair: first instance %q, %d reloads", k.State("pair-a-b"), k.Nudges())
	}
}

// TestReconcileLinkDown: an instance whose interface lost its link is
// FAULT with its gate open, as it should be: Reconcile does not reload
// keepalived for that, and the instance agrees again once the link is
// back.
func TestReconcileLinkDown(t *testing.T) {
	topo.Skip(t, "keepalived")
	top := topo.New(t, topo.Options{Nodes: 2})
	k, err := NewKeepalived("", top.Nodes[0].NS, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Stop(t.Context()) })
	cfg := pairConfig(t.TempDir(), top, 0)
	if err := k.Apply(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}
	if err := k.SetHealthy("pair-a-b", true); err != nil {
		t.Fatal(err)
	}
	reconcile := func() {
		if err := k.Reconcile(time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the instance running", 3*time.Second, func() bool { reconcile(); return agrees(k.State("pair-a-b"), true) })
	if err := top.Nodes[0].SetLink(false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = top.Nodes[0].SetLink(true) })
	waitFor(t, "keepalived FAULT on the link going down", 3*time.Second, func() bool { reconcile(); return k.State("pair-a-b") == "FAULT" })
	for end := time.Now().Add(stateGrace + time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		reconcile()
	}
	if n := k.Nudges(); n != 0 {
		t.Fatalf("reloaded keepalived %d times for an instance whose link is down; log:\n%s", n, readLog(cfg))
	}
	if err := top.Nodes[0].SetLink(true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the instance back once the link is", 5*time.Second, func() bool { reconcile(); return agrees(k.State("pair-a-b"), true) })
	if n := k.Nudges(); n != 0 {
		t.Fatalf("%d reloads", n)
	}
}
