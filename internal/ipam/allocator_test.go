package ipam

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

func pool(t *testing.T, cidr string) Pool {
	t.Helper()
	p, err := ParsePool("--pool", cidr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newAlloc(t *testing.T, internal, public string) *Allocator {
	t.Helper()
	if public == "" {
		return New(pool(t, internal), nil)
	}
	p := pool(t, public)
	return New(pool(t, internal), &p)
}

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func lbAt(uuid string, minute int) *model.LoadBalancer {
	return &model.LoadBalancer{UUID: uuid, Name: "default/" + uuid, CreatedAt: epoch.Add(time.Duration(minute) * time.Minute)}
}

func assign(t *testing.T, a *Allocator, lb *model.LoadBalancer, vip, fip string) {
	t.Helper()
	if err := a.Assign(lb); err != nil {
		t.Fatalf("Assign(%s): %v", lb.UUID, err)
	}
	if lb.VIP != vip || lb.FIP != fip {
		t.Fatalf("Assign(%s) = VIP %q FIP %q, want %q %q", lb.UUID, lb.VIP, lb.FIP, vip, fip)
	}
}

func assignErr(t *testing.T, a *Allocator, lb *model.LoadBalancer, kind error, msg string) {
	t.Helper()
	before := *lb
	err := a.Assign(lb)
	if !errors.Is(err, kind) {
		t.Fatalf("Assign(%s) error = %v, want %v", lb.UUID, err, kind)
	}
	if msg != "" && err.Error() != msg {
		t.Fatalf("Assign(%s) error = %q\nwant %q", lb.UUID, err, msg)
	}
	if lb.VIP != before.VIP || lb.FIP != before.FIP {
		t.Fatalf("failed Assign changed lb to VIP %q FIP %q", lb.VIP, lb.FIP)
	}
}

func TestAssignVIP(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/29", "") // hosts .1-.6
	x, y, z := lbAt("x", 0), lbAt("y", 0), lbAt("z", 0)
	assign(t, a, x, "10.0.0.1", "")
	assign(t, a, y, "10.0.0.2", "")
	assign(t, a, z, "10.0.0.3", "")

	// A fresh translation (no VIP) of a known UUID keeps its address.
	again := lbAt("y", 0)
	assign(t, a, again, "10.0.0.2", "")
	// So does one that asks for another: addresses never move.
	again.VIP = "10.0.0.6"
	assign(t, a, again, "10.0.0.2", "")

	a.Release("y")
	assign(t, a, lbAt("w", 0), "10.0.0.2", "") // lowest free again
	a.Release("nobody")                        // no-op

	// A new object that carries a free in-pool VIP (restored from the
	// store without Replay) keeps it rather than taking the lowest.
	v := lbAt("v", 0)
	v.VIP = "10.0.0.5"
	assign(t, a, v, "10.0.0.5", "")
	// One carrying a taken VIP gets the lowest free instead.
	u := lbAt("u", 0)
	u.VIP = "10.0.0.1"
	assign(t, a, u, "10.0.0.4", "")
}

func TestAssignWalksPastDot255(t *testing.T) {
	a := newAlloc(t, "127.10.0.0/16", "")
	for i := 1; i <= 254; i++ {
		assign(t, a, lbAt(fmt.Sprint("fill", i), 0), fmt.Sprintf("127.10.0.%d", i), "")
	}
	assign(t, a, lbAt("a", 0), "127.10.0.255", "")
	assign(t, a, lbAt("b", 0), "127.10.1.0", "")
	assign(t, a, lbAt("c", 0), "127.10.1.1", "")
}

func TestAssignExhausted(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/30", "") // .1 and .2
	assign(t, a, lbAt("x", 0), "10.0.0.1", "")
	assign(t, a, lbAt("y", 0), "10.0.0.2", "")
	assignErr(t, a, lbAt("z", 0), ErrPoolExhausted,
		"no free VIP for load balancer default/z: internal pool 10.0.0.0/30 is exhausted")
	a.Release("x")
	assign(t, a, lbAt("z", 0), "10.0.0.1", "")
}

func TestAssignIPv6(t *testing.T) {
	a := newAlloc(t, "fd00:10::/64", "fd00:20::/126")
	assign(t, a, lbAt("x", 0), "fd00:10::", "fd00:20::")
	assign(t, a, lbAt("y", 0), "fd00:10::1", "fd00:20::1")
}

func TestAssignFIPFromPublicPool(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/24", "192.0.2.0/30") // public hosts .1 and .2
	x := lbAt("x", 0)
	assign(t, a, x, "10.0.0.1", "192.0.2.1")
	assign(t, a, lbAt("y", 0), "10.0.0.2", "192.0.2.2")
	assignErr(t, a, lbAt("z", 0), ErrPoolExhausted,
		"no free external IP for load balancer default/z: public pool 192.0.2.0/30 is exhausted")
	// z got nothing: the internal address it would have had is still free.
	a.Release("y")
	assign(t, a, lbAt("z", 0), "10.0.0.2", "192.0.2.2")
	x.FIP = ""
	assign(t, a, x, "10.0.0.1", "192.0.2.1")
}

func TestAssignPinnedFIP(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/24", "192.0.2.0/24")
	x := lbAt("x", 0)
	x.RequestedFIP = "192.0.2.7"
	assign(t, a, x, "10.0.0.1", "192.0.2.7")

	y := lbAt("y", 0)
	y.RequestedFIP = "192.0.2.7"
	assignErr(t, a, y, ErrAddressInUse, "external IP 192.0.2.7 is already used by load balancer default/x")

	y.RequestedFIP = "198.51.100.1"
	assignErr(t, a, y, ErrOutsidePool,
		"external IP 198.51.100.1 is outside the configured pools (internal 10.0.0.0/24, public 192.0.2.0/24)")
	y.RequestedFIP = "not-an-ip"
	assignErr(t, a, y, ErrInvalidAddress, `external IP "not-an-ip" is not a valid IP address`)
	y.RequestedFIP = "10.0.0.1"
	assignErr(t, a, y, ErrAddressInUse, "external IP 10.0.0.1 is already used by load balancer default/x")

	// Changing the pin releases the old address for others.
	x.RequestedFIP = "192.0.2.9"
	assign(t, a, x, "10.0.0.1", "192.0.2.9")
	y.RequestedFIP = "192.0.2.7"
	assign(t, a, y, "10.0.0.2", "192.0.2.7")

	// Pinning one's own VIP is refused; the previous FIP stays.
	x.RequestedFIP = "10.0.0.1"
	assignErr(t, a, x, ErrAddressInUse, "external IP 10.0.0.1 is already the VIP of this load balancer")

	// Dropping the pin: a pinned address inside the public pool is kept,
	// as the FIP it already is.
	x.RequestedFIP = ""
	assign(t, a, x, "10.0.0.1", "192.0.2.9")
}

func TestAssignPinnedFIPInInternalPool(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/24", "")
	x := lbAt("x", 0)
	x.RequestedFIP = "10.0.0.1" // the lowest free: x's VIP must skip it
	assign(t, a, x, "10.0.0.2", "10.0.0.1")
	assign(t, a, lbAt("y", 0), "10.0.0.3", "")

	// Without a public pool, dropping the pin drops the FIP.
	x.RequestedFIP = ""
	assign(t, a, x, "10.0.0.2", "")
	assign(t, a, lbAt("z", 0), "10.0.0.1", "")
}

func TestAssignNeedsUUID(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/24", "")
	if err := a.Assign(&model.LoadBalancer{}); err == nil {
		t.Fatal("Assign without UUID succeeded")
	}
}

// The restart case: A and B are in the store; a new allocator that replays
// them before assigning gives the newcomer C the next address.
func TestReplayBeforeAssignPreventsStealing(t *testing.T) {
	stored := []*model.LoadBalancer{lbAt("b", 1), lbAt("a", 0)}
	stored[0].VIP, stored[1].VIP = "127.10.0.2", "127.10.0.1"

	// Control: without Replay the newcomer takes A's address. This is the
	// failure the ordering prevents.
	naive := newAlloc(t, "127.10.0.0/16", "")
	assign(t, naive, lbAt("c", 2), "127.10.0.1", "")

	a := newAlloc(t, "127.10.0.0/16", "")
	if errs := a.Replay(stored); len(errs) != 0 {
		t.Fatalf("Replay: %v", errs)
	}
	assign(t, a, lbAt("c", 2), "127.10.0.3", "")
	assign(t, a, lbAt("a", 0), "127.10.0.1", "")
	assign(t, a, lbAt("b", 1), "127.10.0.2", "")
}

func TestReplayConflicts(t *testing.T) {
	older, newer := lbAt("z-older", 0), lbAt("a-newer", 5)
	older.VIP, newer.VIP = "10.0.0.1", "10.0.0.1"
	tie1, tie2 := lbAt("t1", 9), lbAt("t2", 9)
	tie1.FIP, tie2.FIP = "192.0.2.1", "192.0.2.1"
	tie1.VIP, tie2.VIP = "10.0.0.5", "10.0.0.6"

	a := newAlloc(t, "10.0.0.0/24", "192.0.2.0/24")
	errs := a.Replay([]*model.LoadBalancer{tie2, newer, tie1, older, nil})
	got := fmt.Sprint(errs)
	for _, want := range []string{
		"load balancer default/a-newer: stored VIP 10.0.0.1 is already held by load balancer default/z-older, which is older",
		"load balancer default/t2: stored external IP 192.0.2.1 is already held by load balancer default/t1, which is older",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Replay errors %s\ndo not include %q", got, want)
		}
	}
	if len(errs) != 2 || !errors.Is(errs[0], ErrAddressInUse) {
		t.Fatalf("Replay errors = %v, want 2 ErrAddressInUse", errs)
	}
	// The losers get new addresses; the winners keep theirs.
	assign(t, a, newer, "10.0.0.2", "192.0.2.2")
	assign(t, a, older, "10.0.0.1", "192.0.2.3")
	assign(t, a, tie1, "10.0.0.5", "192.0.2.1")
	assign(t, a, tie2, "10.0.0.6", "192.0.2.4")
}

func TestReplayOutsidePool(t *testing.T) {
	moved := lbAt("x", 0)
	moved.VIP, moved.FIP = "10.9.0.1", "bogus"
	a := newAlloc(t, "10.0.0.0/24", "")
	errs := a.Replay([]*model.LoadBalancer{moved})
	if len(errs) != 2 || !errors.Is(errs[0], ErrOutsidePool) || !errors.Is(errs[1], ErrInvalidAddress) {
		t.Fatalf("Replay errors = %v, want ErrOutsidePool then ErrInvalidAddress", errs)
	}
	want := "load balancer default/x: stored VIP 10.9.0.1 is outside the internal pool 10.0.0.0/24; it will get a new one"
	if errs[0].Error() != want {
		t.Fatalf("error = %q\nwant %q", errs[0], want)
	}
	assign(t, a, moved, "10.0.0.1", "")
}

func TestReplayVIPEqualsFIP(t *testing.T) {
	x := lbAt("x", 0)
	x.VIP, x.FIP = "10.0.0.4", "10.0.0.4"
	a := newAlloc(t, "10.0.0.0/24", "")
	errs := a.Replay([]*model.LoadBalancer{x})
	if len(errs) != 1 || !errors.Is(errs[0], ErrAddressInUse) {
		t.Fatalf("Replay errors = %v, want one ErrAddressInUse", errs)
	}
}
