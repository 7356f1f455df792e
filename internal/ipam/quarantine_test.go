package ipam

import (
	"net/netip"
	"testing"
	"time"

	"pier.dev/pier/internal/model"
)

// The squatter's race: a squatter pins the victim's FIP and waits; the
// victim is deleted and re-created (a new UID, the same name). Within the
// quarantine the squatter is refused and the victim gets both its
// addresses back; after it, the address is free for anyone.
func TestQuarantineKeepsFreedAddressForItsOwner(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/29", "192.0.2.0/29")
	now := epoch
	a.now = func() time.Time { return now }
	a.SetQuarantine(10 * time.Minute)

	victim := &model.LoadBalancer{UUID: "uid-1", Name: "team-a/web"}
	assign(t, a, victim, "10.0.0.1", "192.0.2.1")
	squatter := &model.LoadBalancer{UUID: "uid-9", Name: "team-b/evil", RequestedFIP: "192.0.2.1"}
	assignErr(t, a, squatter, ErrAddressInUse, "external IP 192.0.2.1 is already used by load balancer team-a/web")

	a.Release("uid-1")
	assignErr(t, a, squatter, ErrAddressInUse,
		"external IP 192.0.2.1 was freed by load balancer team-a/web and stays reserved for it until 2025-01-01T00:10:00Z (--address-quarantine)")
	// A newcomer without a pin does not get the quarantined addresses.
	other := &model.LoadBalancer{UUID: "uid-5", Name: "team-c/app"}
	assign(t, a, other, "10.0.0.2", "192.0.2.2")

	now = now.Add(5 * time.Minute)
	recreated := &model.LoadBalancer{UUID: "uid-2", Name: "team-a/web"}
	assign(t, a, recreated, "10.0.0.1", "192.0.2.1")
	assignErr(t, a, squatter, ErrAddressInUse, "external IP 192.0.2.1 is already used by load balancer team-a/web")

	a.Release("uid-2")
	now = now.Add(10*time.Minute + time.Second)
	assign(t, a, squatter, "10.0.0.1", "192.0.2.1")
}

// An owner that changes its own pin leaves the old address in quarantine
// too: nobody else may take it while clients may still resolve it.
func TestQuarantineAfterPinChange(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/29", "192.0.2.0/29")
	now := epoch
	a.now = func() time.Time { return now }
	a.SetQuarantine(time.Minute)
	owner := &model.LoadBalancer{UUID: "uid-1", Name: "a/web", RequestedFIP: "192.0.2.3"}
	assign(t, a, owner, "10.0.0.1", "192.0.2.3")
	owner.RequestedFIP = "192.0.2.4"
	assign(t, a, owner, "10.0.0.1", "192.0.2.4")
	other := &model.LoadBalancer{UUID: "uid-2", Name: "b/x", RequestedFIP: "192.0.2.3"}
	assignErr(t, a, other, ErrAddressInUse, "")
	now = now.Add(time.Minute)
	assign(t, a, other, "10.0.0.2", "192.0.2.3")
}

// Without a quarantine (zero), a freed address is free at once, as before.
func TestNoQuarantine(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/29", "192.0.2.0/29")
	assign(t, a, &model.LoadBalancer{UUID: "uid-1", Name: "a/web"}, "10.0.0.1", "192.0.2.1")
	a.Release("uid-1")
	assign(t, a, &model.LoadBalancer{UUID: "uid-2", Name: "b/x"}, "10.0.0.1", "192.0.2.1")
}

// Addresses found in the state folder after pier's database was lost are
// kept for the UUID that held them: that load balancer gets them back
// whatever order the first pass takes, a squatter's pin and a newcomer
// do not get them, and they are free once the reservation ends.
func TestReserveKeepsAddressesForTheirUUID(t *testing.T) {
	a := newAlloc(t, "10.0.0.0/29", "192.0.2.0/29")
	now := epoch
	a.now = func() time.Time { return now }
	a.Reserve("uid-1", "", []netip.Addr{netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("192.0.2.5")},
		now.Add(10*time.Minute))

	squatter := &model.LoadBalancer{UUID: "uid-9", Name: "team-b/evil", RequestedFIP: "192.0.2.5"}
	assignErr(t, a, squatter, ErrAddressInUse,
		"external IP 192.0.2.5 was held by load balancer uid-1 when pier's database was lost and stays reserved for it until 2025-01-01T00:10:00Z")
	other := &model.LoadBalancer{UUID: "uid-5", Name: "team-c/app"}
	assign(t, a, other, "10.0.0.1", "192.0.2.1")
	holder := &model.LoadBalancer{UUID: "uid-1", Name: "team-a/web"}
	assign(t, a, holder, "10.0.0.3", "192.0.2.5")

	// Once the reservation ends, an address nobody came back for is free.
	b := newAlloc(t, "10.0.0.0/29", "192.0.2.0/29")
	b.now = func() time.Time { return now }
	b.Reserve("uid-1", "", []netip.Addr{netip.MustParseAddr("192.0.2.5")}, now.Add(time.Minute))
	assignErr(t, b, squatter, ErrAddressInUse, "")
	now = now.Add(time.Minute)
	assign(t, b, squatter, "10.0.0.1", "192.0.2.5")
}
