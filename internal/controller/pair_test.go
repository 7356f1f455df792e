package controller

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/routerid"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func node(name, addr string) source.Node {
	return source.Node{Name: name, Ready: true, Address: netip.MustParseAddr(addr)}
}

var pairNodes = []source.Node{node("a", "192.0.2.1"), node("b", "192.0.2.2"), node("c", "192.0.2.3")}

// seeded stores lbs as placed by an older pier (no router ids), then
// returns a reconciler over ids whose index holds them, as after a start.
func seeded(t *testing.T, ids routerid.Range, lbs ...*model.LoadBalancer) (*Reconciler, store.Store) {
	t.Helper()
	_, st := newReconciler(t, "10.0.0.0/24", "")
	for _, lb := range lbs {
		if err := st.PutSpec(context.Background(), lb); err != nil {
			t.Fatal(err)
		}
	}
	return restarted(t, st, ids), st
}

// restarted is a new reconciler on st: a new index read from it, new
// allocators, as a new pier process has.
func restarted(t *testing.T, st store.Store, ids routerid.Range) *Reconciler {
	t.Helper()
	lbs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	alloc, err := ipam.FromCIDRs("10.0.0.0/24", "")
	if err != nil {
		t.Fatal(err)
	}
	return &Reconciler{Store: st, Index: NewIndex(lbs), IPAM: alloc, RouterIDs: routerid.New(ids),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func onPair(uuid string, age time.Duration, active, standby string) *model.LoadBalancer {
	lb := lbFor(uuid, uuid, t0.Add(-age), "")
	lb.Placement = model.Placement{Active: active, Standby: standby}
	return lb
}

// placements reads what the store holds, by UUID.
func placements(t *testing.T, st store.Store) map[string]model.Placement {
	t.Helper()
	lbs, err := st.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]model.Placement{}
	for _, lb := range lbs {
		out[lb.UUID] = lb.Placement
	}
	return out
}

func apply(t *testing.T, r *Reconciler, nodes []source.Node, lbs ...*model.LoadBalancer) []model.Problem {
	t.Helper()
	applied, err := r.Apply(context.Background(), result(lbs...), nodes)
	if err != nil {
		t.Fatal(err)
	}
	return applied.Problems
}

func wantIDs(t *testing.T, st store.Store, want map[string]int) {
	t.Helper()
	got := placements(t, st)
	for uuid, id := range want {
		if got[uuid].RouterID != id {
			t.Errorf("%s: router id %d, want %d (placements %+v)", uuid, got[uuid].RouterID, id, got)
		}
	}
}

// Load balancers on one ordered pair share its id; the reversed pair is
// another VRRP instance (priorities swapped) with another id. The
// placement carries both nodes' addresses.
func TestPairsShareRouterIDs(t *testing.T) {
	r, st := seeded(t, routerid.DefaultRange, onPair("lb1", 3*time.Hour, "a", "b"), onPair("lb3", time.Hour, "b", "a"))
	// lb2 is new: a and b carry 2 each, c is not ready, so it goes on (a, b).
	nodes := []source.Node{pairNodes[0], pairNodes[1], {Name: "c"}}
	apply(t, r, nodes, onPair("lb1", 3*time.Hour, "", ""), lbFor("lb2", "lb2", t0, ""), onPair("lb3", time.Hour, "", ""))
	wantIDs(t, st, map[string]int{"lb1": 1, "lb2": 1, "lb3": 2})
	got := placements(t, st)
	if p := got["lb3"]; p.Active != "b" || p.ActiveAddress != "192.0.2.2" || p.StandbyAddress != "192.0.2.1" {
		t.Errorf("lb3 placement %+v, want b (192.0.2.2) then a (192.0.2.1)", p)
	}
	if p := got["lb2"]; p.Active != "a" || p.Standby != "b" {
		t.Errorf("lb2 placement %+v, want a/b", p)
	}
}

// A restart never renumbers a live pair: the stored ids are replayed
// before the new load balancer (older, so handled first) takes one.
func TestRestartKeepsRouterIDs(t *testing.T) {
	r, st := seeded(t, routerid.DefaultRange, onPair("lb1", 3*time.Hour, "a", "b"), onPair("lb3", time.Hour, "b", "a"))
	apply(t, r, pairNodes[:2], onPair("lb1", 3*time.Hour, "", ""), onPair("lb3", time.Hour, "", ""))
	wantIDs(t, st, map[string]int{"lb1": 1, "lb3": 2})

	r = restarted(t, st, routerid.DefaultRange)
	// lb0 is new and the oldest: (c, a), c being the least loaded.
	apply(t, r, pairNodes, lbFor("lb0", "lb0", t0.Add(-9*time.Hour), ""),
		onPair("lb1", 3*time.Hour, "", ""), onPair("lb3", time.Hour, "", ""))
	wantIDs(t, st, map[string]int{"lb0": 3, "lb1": 1, "lb3": 2})
}

// A pair that no load balancer uses any more frees its id for the next
// new pair; until then the range is exhausted, which refuses the new load
// balancer and leaves existing ones as stored.
func TestVanishedPairFreesItsRouterID(t *testing.T) {
	ids := routerid.Range{First: 1, Last: 2}
	r, st := seeded(t, ids, onPair("lb1", 3*time.Hour, "a", "b"), onPair("lb2", 2*time.Hour, "b", "a"))
	lb1, lb2 := onPair("lb1", 3*time.Hour, "", ""), onPair("lb2", 2*time.Hour, "", "")
	apply(t, r, pairNodes, lb1, lb2)
	wantIDs(t, st, map[string]int{"lb1": 1, "lb2": 2})

	// lb3 goes on (c, a): a third pair, with no id left.
	res := result(lb1, lb2, lbFor("lb3", "lb3", t0, ""))
	applied, err := r.Apply(context.Background(), res, pairNodes)
	problems := applied.Problems
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Name != "lb3" || problems[0].Reason != "VRRPRouterIDsExhausted" {
		t.Fatalf("problems %+v, want lb3 VRRPRouterIDsExhausted", problems)
	}
	if _, ok := res.Without(applied.Refused).Accepted[model.IngressRef("ns", "lb3")]; ok {
		t.Error("lb3 accepted without a router id")
	}
	if _, ok := placements(t, st)["lb3"]; ok {
		t.Error("lb3 stored without a router id")
	}

	// Node b fails: lb1 and lb2 would both move to (a, c), a new pair:
	// refused, they keep what they had.
	down := []source.Node{pairNodes[0], {Name: "b"}, pairNodes[2]}
	if problems := apply(t, r, down, lb1, lb2); len(problems) != 2 {
		t.Fatalf("problems %+v, want lb1 and lb2 refused", problems)
	}
	if p := placements(t, st)["lb1"]; p.Standby != "b" || p.RouterID != 1 {
		t.Errorf("lb1 placement %+v, want the stored one", p)
	}

	// lb2 goes: (b, a) is free, and its id goes to lb3's pair.
	apply(t, r, pairNodes, lb1, lbFor("lb3", "lb3", t0, ""))
	got := placements(t, st)
	if p := got["lb3"]; p.Active != "c" || p.Standby != "a" || p.RouterID != 2 {
		t.Errorf("lb3 placement %+v, want c/a with id 2", p)
	}
}

// A node whose address changes updates the placements that name it.
func TestNodeAddressChangeUpdatesPlacement(t *testing.T) {
	r, st := seeded(t, routerid.DefaultRange, onPair("lb1", time.Hour, "a", "b"))
	lb1 := onPair("lb1", time.Hour, "", "")
	apply(t, r, pairNodes[:2], lb1)
	moved := []source.Node{pairNodes[0], node("b", "198.51.100.2")}
	apply(t, r, moved, lb1)
	if p := placements(t, st)["lb1"]; p.StandbyAddress != "198.51.100.2" || p.RouterID != 1 {
		t.Errorf("placement %+v, want standby address 198.51.100.2, id 1", p)
	}
}

// A cordoned node keeps the roles it has and gets no new one: lb1 stays
// on (a, b) while a drains; lb2, new, avoids a; when b fails, lb1 keeps
// a active (alive, so it does not move) and takes c as its standby.
func TestCordonedNodeKeepsRolesGetsNoNewOne(t *testing.T) {
	r, st := seeded(t, routerid.DefaultRange, onPair("lb1", time.Hour, "a", "b"))
	lb1, lb2 := onPair("lb1", time.Hour, "", ""), lbFor("lb2", "lb2", t0, "")
	cordoned := []source.Node{pairNodes[0], pairNodes[1], pairNodes[2]}
	cordoned[0].Draining = true
	apply(t, r, cordoned, lb1, lb2)
	got := placements(t, st)
	if p := got["lb1"]; p.Active != "a" || p.Standby != "b" {
		t.Errorf("lb1 placement %+v, want a/b kept while a drains", p)
	}
	if p := got["lb2"]; p.Active == "a" || p.Standby == "a" || p.Active == "" || p.Standby == "" {
		t.Errorf("lb2 placement %+v, want a pair without the draining a", p)
	}
	bDown := []source.Node{cordoned[0], {Name: "b"}, pairNodes[2]}
	apply(t, r, bDown, lb1, lb2)
	if p := placements(t, st)["lb1"]; p.Active != "a" || p.Standby != "c" {
		t.Errorf("lb1 placement %+v after b failed, want a kept, c as the new standby", p)
	}
}
