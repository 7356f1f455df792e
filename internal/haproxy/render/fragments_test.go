package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// TestTenFragmentsLoadTogether: ten load balancers that use the same
// Services (so the same pool IDs), the same ports and the same
// certificate IDs on different VIPs load into ONE HAProxy together with
// global.conf and one process.conf: every section name is scoped to its
// load balancer. Warnings are fatal (-dW), as for the goldens.
func TestTenFragmentsLoadTogether(t *testing.T) {
	bin := haproxyBin(t)
	var tls *model.LoadBalancer
	for _, f := range fixtures() {
		if f.name == "tls-two-certs" {
			tls = f.lb
		}
	}
	root, err := os.MkdirTemp("", "pfrag") // socket paths must stay short
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	l, err := layout.New(root)
	if err != nil {
		t.Fatal(err)
	}
	var fragments []string
	sections := map[string]string{} // section line -> load balancer
	for i := range 10 {
		lb := tls.Clone()
		lb.UUID = fmt.Sprintf("5f0c6a9e-0d7e-4b1a-9c51-2b7c1e0a4d%02d", i)
		lb.VIP, lb.FIP = fmt.Sprintf("127.0.1.%d", i+1), fmt.Sprintf("127.0.2.%d", i+1)
		at, err := l.LB(lb.UUID)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Render(lb, at, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(r.Fragment), "\n") {
			if strings.HasPrefix(line, "frontend ") || strings.HasPrefix(line, "backend ") {
				if other, dup := sections[line]; dup {
					t.Fatalf("%q in the fragments of %s and %s", line, other, lb.UUID)
				}
				sections[line] = lb.UUID
			}
		}
		if r.CrtList != nil {
			writeFile(t, r.CrtListPath, r.CrtList)
		}
		writeCerts(t, at.Dir, lb)
		writeMaps(t, r.Maps, "")
		writeFile(t, at.Config(), r.Fragment)
		fragments = append(fragments, at.Config())
	}
	if len(sections) != 10*5 {
		t.Fatalf("%d sections, want 50 (2 frontends, 3 backends each)", len(sections))
	}
	// The goldens' global.conf and process.conf, relocated to the shard.
	checkFiles(t, bin, l.Root(), fragments...)
}

// TestStickySlots: a member that sorts below the others joins a pool of
// five; every member keeps its slot, the new one takes a free slot, and
// one runtime command set touches that slot only.
func TestStickySlots(t *testing.T) {
	var ms []model.Member
	for i := 2; i <= 6; i++ {
		ms = append(ms, member(fmt.Sprintf("10.0.0.%d", i), 8080))
	}
	old := mustRender(t, planFixture(ms...), nil)
	next := planFixture(append([]model.Member{member("10.0.0.1", 8080)}, ms...)...)
	nr := mustRender(t, next, old.Slots)
	id := next.Pools[0].ID
	for i, k := range old.Slots[id] {
		if k.IsValid() && nr.Slots[id][i] != k {
			t.Errorf("slot s%d moved from %s to %s", i+1, k, nr.Slots[id][i])
		}
	}
	p, err := PlanUpdate(old, nr)
	if err != nil || p.Reload {
		t.Fatalf("plan %+v %v", p, err)
	}
	be := "be_" + fixtureUUID + "_" + id + "/s6 "
	for _, c := range p.Commands {
		if !strings.Contains(c.String(), be) {
			t.Errorf("command on another slot than s6: %s", c)
		}
	}
	if len(p.Commands) != 2 { // addr, then ready
		t.Errorf("commands %q, want addr and ready on s6", commands(p))
	}
	// Same spec, same history (read back from JSON): same bytes.
	b, err := json.Marshal(old.Slots)
	if err != nil {
		t.Fatal(err)
	}
	var back Slots
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	again := mustRender(t, next, back)
	if !bytes.Equal(again.Fragment, nr.Fragment) {
		t.Fatalf("re-render with the same history differs:\n%s\n%s", again.Fragment, nr.Fragment)
	}
	// With no history the order is sorted, as before.
	fresh := mustRender(t, next, nil)
	if got := fresh.Slots[id][0]; got != netip.MustParseAddrPort("10.0.0.1:8080") {
		t.Errorf("fresh render s1 = %s", got)
	}
}

// TestAssignSlotsPrefersFreeSlots: a new member takes a slot that was
// already free before one its leaving member vacated in the same change.
func TestAssignSlotsPrefersFreeSlots(t *testing.T) {
	a, b, c := slotAt("10.0.0.1:80"), slotAt("10.0.0.2:80"), slotAt("10.0.0.3:80")
	prev := []netip.AddrPort{a.key(), b.key(), {}, {}}
	got := assignSlots([]slot{a, c}, 4, prev)
	want := []slot{a, placeholder, c, placeholder}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// Shrinking: a member beyond the new count moves to a free slot.
	got = assignSlots([]slot{c}, 2, []netip.AddrPort{{}, {}, {}, c.key()})
	if !slices.Equal(got, []slot{c, placeholder}) {
		t.Fatalf("shrink: %v", got)
	}
	// A duplicated member (same address and port) keeps both its slots.
	got = assignSlots([]slot{a, a}, 4, []netip.AddrPort{{}, a.key(), {}, a.key()})
	if !slices.Equal(got, []slot{placeholder, a, placeholder, a}) {
		t.Fatalf("duplicates: %v", got)
	}
}

func slotAt(s string) slot {
	ap := netip.MustParseAddrPort(s)
	return slot{used: true, addr: ap.Addr(), port: int(ap.Port()), weight: 1}
}
