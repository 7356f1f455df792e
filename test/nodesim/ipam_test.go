package nodesim

import (
	"errors"
	"net/netip"
	"testing"
)

func mustAssign(t *testing.T, a *allocator, owner string) netip.Addr {
	t.Helper()
	ip, err := a.Assign(owner)
	if err != nil {
		t.Fatalf("Assign(%s): %v", owner, err)
	}
	return ip
}

func TestAllocatorSkipsReservedAndIsNextFit(t *testing.T) {
	a, err := newAllocator(netip.MustParsePrefix("10.244.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	// .0.0 is the network, .0.1 is on the namespace's lo.
	if got := mustAssign(t, a, "p1"); got != netip.MustParseAddr("10.244.0.2") {
		t.Fatalf("first address %s, want 10.244.0.2", got)
	}
	if got := mustAssign(t, a, "p1"); got != netip.MustParseAddr("10.244.0.2") {
		t.Fatalf("same owner got %s, want its address again", got)
	}
	mustAssign(t, a, "p2") // .0.3
	a.Release("p1")
	if got := mustAssign(t, a, "p3"); got != netip.MustParseAddr("10.244.0.4") {
		t.Fatalf("after a release got %s, want 10.244.0.4 (next-fit, no quick reuse)", got)
	}
}

func TestAllocatorWrapsAndExhausts(t *testing.T) {
	a, err := newAllocator(netip.MustParsePrefix("10.1.2.0/29"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, owner := range []string{"a", "b", "c", "d", "e"} {
		got = append(got, mustAssign(t, a, owner).String())
	}
	want := []string{"10.1.2.2", "10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"} // .7 is broadcast
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("assigned %v, want %v", got, want)
		}
	}
	if _, err := a.Assign("f"); !errors.Is(err, errExhausted) {
		t.Fatalf("sixth Assign: %v, want errExhausted", err)
	}
	a.Release("c")
	if ip := mustAssign(t, a, "f"); ip.String() != "10.1.2.4" {
		t.Fatalf("after wrap-around got %s, want the freed 10.1.2.4", ip)
	}
}

func TestAllocatorReserve(t *testing.T) {
	a, err := newAllocator(netip.MustParsePrefix("10.244.0.0/16"))
	if err != nil {
		t.Fatal(err)
	}
	kept := netip.MustParseAddr("10.244.0.2")
	if err := a.Reserve("running", kept); err != nil {
		t.Fatal(err)
	}
	// A replayed address is never handed to a new owner.
	if ip := mustAssign(t, a, "new"); ip == kept {
		t.Fatalf("new owner got the reserved %s", ip)
	}
	for _, tc := range []struct{ owner, ip string }{
		{"other", "10.244.0.2"},     // held
		{"other", "10.244.0.1"},     // the lo address
		{"other", "10.245.0.9"},     // outside
		{"other", "10.244.255.255"}, // broadcast
	} {
		if err := a.Reserve(tc.owner, netip.MustParseAddr(tc.ip)); err == nil {
			t.Errorf("Reserve(%s, %s) succeeded", tc.owner, tc.ip)
		}
	}
	if err := a.Reserve("running", kept); err != nil {
		t.Errorf("reserving one's own address again: %v", err)
	}
}

func TestAllocatorRejectsBadPrefixes(t *testing.T) {
	for _, p := range []string{"fd00::/64", "10.0.0.0/30", "10.0.0.1/32"} {
		if _, err := newAllocator(netip.MustParsePrefix(p)); err == nil {
			t.Errorf("newAllocator(%s) succeeded", p)
		}
	}
}
