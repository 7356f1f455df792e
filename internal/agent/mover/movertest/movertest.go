// Package movertest is the contract every mover.Mover passes, as
// drivertest is for drivers: the agent's core relies on the interface
// alone, and a mover proves itself by running Run against its real
// mechanism (keepalived on a namespace's interface, a BGP session to a
// router).
package movertest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"pier.dev/pier/internal/agent/mover"
	"pier.dev/pier/internal/model"
)

// Wait bounds every wait for the network. Generous: CI machines are
// shared.
var Wait = 15 * time.Second

// Harness is what a mover's test provides.
type Harness struct {
	// New returns a mover of this node with a fresh state. The harness
	// releases whatever it left running when t ends, Close(false)
	// included.
	New func(t *testing.T) mover.Mover
	// LB returns load balancer n placed on this node as its active node,
	// with a standby node elsewhere that never answers; every n shares
	// that pair, distinct n have distinct addresses.
	LB func(t *testing.T, n int) *model.LoadBalancer
	// Attracts reports whether the network sends the traffic of lb's
	// addresses to this node now (VRRP: the node holds them; BGP: the
	// router's path to them goes through this node).
	Attracts func(t *testing.T, lb *model.LoadBalancer) bool
	// Role, when set, checks the Role of a load balancer the mover
	// attracts (what its status will say); nil checks only that it is
	// not zero.
	Role func(t *testing.T, m mover.Mover, lb *model.LoadBalancer)
}

// Run checks h's mover against the contract:
//
//   - Nothing is attracted, and every Role is zero, before the mover is
//     given placements; then it attracts the addresses of the load
//     balancers that serve here, Holding says so and Ready is nil.
//   - A load balancer that served and stops being healthy stops
//     attracting its traffic, and attracts it again once healthy.
//   - One placed here whose data plane never comes up takes no address
//     away from another.
//   - Drain hands every address over (Holding turns false) and its end
//     takes them back; a mover that asked clients to reconnect stops
//     asking when the drain ends.
//   - A load balancer no longer placed here stops attracting and its Role
//     turns zero.
//   - Close(true) lets every address go; Close(false) keeps attracting.
//   - Throughout, every change of a Role is named by the Tick that made
//     it: the agent reports only what Tick names.
func Run(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"AttractsWhatServes", testAttracts},
		{"UnhealthyLetsGo", testUnhealthy},
		{"NeverServedMovesNothing", testNeverServed},
		{"DrainHandsOver", testDrain},
		{"RemovedLetsGo", testRemoved},
		{"CloseStopLetsGo", testCloseStop},
		{"CloseKeepsAttracting", testCloseKeep},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// Node is the agent's side as a test sets it: per load balancer, whether
// its data plane is healthy and has served.
type Node struct {
	mu         sync.Mutex
	healthy    map[string]bool
	served     map[string]bool
	reconnects []bool
}

// Set sets uuid's health, and whether it has served.
func (n *Node) Set(uuid string, healthy, served bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.healthy[uuid], n.served[uuid] = healthy, served
}

func (n *Node) Healthy(uuid string) bool { n.mu.Lock(); defer n.mu.Unlock(); return n.healthy[uuid] }
func (n *Node) Served(uuid string) bool  { n.mu.Lock(); defer n.mu.Unlock(); return n.served[uuid] }
func (n *Node) Wake()                    {}

func (n *Node) Reconnect(_ context.Context, on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.reconnects = append(n.reconnects, on)
}

func (n *Node) reconnected() []bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.reconnects)
}

// running is a started mover ticked the way the agent ticks it.
type running struct {
	m    mover.Mover
	node *Node
	mu   sync.Mutex // the mover's methods run one at a time
	// roles is each placed load balancer's Role as the ticks named it.
	roles  map[string]mover.Role
	placed []*model.LoadBalancer
	stop   func()
}

// start starts m and ticks it every mover.TickEvery until the test ends
// or stop is called, checking after each tick that the Roles that changed
// are the ones it named, and telling the mover its reports were written,
// as the agent's writer would.
func start(t *testing.T, m mover.Mover) *running {
	t.Helper()
	r := &running{m: m, node: &Node{healthy: map[string]bool{}, served: map[string]bool{}}, roles: map[string]mover.Role{}}
	if err := m.Start(context.Background(), r.node); err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(mover.TickEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			r.do(func(m mover.Mover) { r.tick(t, m) })
		}
	})
	r.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(r.stop)
	return r
}

func (r *running) do(f func(mover.Mover)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r.m)
}

// tick runs one Tick and checks it named every Role it changed.
func (r *running) tick(t *testing.T, m mover.Mover) {
	changed := m.Tick(context.Background())
	uuids := map[string]bool{}
	for uuid := range r.roles {
		uuids[uuid] = true
	}
	for _, lb := range r.placed {
		uuids[lb.UUID] = true
	}
	for uuid := range uuids {
		role := m.Role(uuid)
		if role == r.roles[uuid] {
			continue
		}
		if !slices.Contains(changed, uuid) {
			t.Errorf("the role of %s changed from %+v to %+v in a Tick that named only %v", uuid, r.roles[uuid], role, changed)
		}
		r.roles[uuid] = role
		m.Reported(uuid, model.NodeStatus{State: model.StateActive, VRRP: role.VRRP, BGP: role.BGP, UpdatedAt: time.Now().UTC()})
	}
}

// sync gives the mover lbs, healthy and served.
func (r *running) sync(lbs ...*model.LoadBalancer) {
	r.do(func(m mover.Mover) {
		r.placed = slices.Clone(lbs)
		slices.SortFunc(r.placed, func(a, b *model.LoadBalancer) int {
			switch {
			case a.UUID < b.UUID:
				return -1
			case a.UUID > b.UUID:
				return 1
			}
			return 0
		})
		m.Sync(context.Background(), r.placed)
	})
}

func (r *running) role(uuid string) mover.Role {
	var role mover.Role
	r.do(func(m mover.Mover) { role = m.Role(uuid) })
	return role
}

func (r *running) holding() bool {
	var h bool
	r.do(func(m mover.Mover) { h = m.Holding() })
	return h
}

func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", Wait, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// throughout checks that f holds for d.
func throughout(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if !f() {
			t.Fatalf("within %s: %s", d, what)
		}
	}
}

// attracting starts a mover with load balancers 0 and 1 healthy and
// served, and waits until it attracts both.
func attracting(t *testing.T, h Harness) (*running, *model.LoadBalancer, *model.LoadBalancer) {
	t.Helper()
	r := start(t, h.New(t))
	lb0, lb1 := h.LB(t, 0), h.LB(t, 1)
	for _, lb := range []*model.LoadBalancer{lb0, lb1} {
		r.node.Set(lb.UUID, true, true)
	}
	r.sync(lb0, lb1)
	eventually(t, "the addresses of two healthy load balancers are not attracted", func() bool {
		return h.Attracts(t, lb0) && h.Attracts(t, lb1) && r.holding()
	})
	return r, lb0, lb1
}

func testAttracts(t *testing.T, h Harness) {
	r := start(t, h.New(t))
	lb := h.LB(t, 0)
	r.node.Set(lb.UUID, true, true)
	throughout(t, 500*time.Millisecond, "attracted or given a role before it was placed", func() bool {
		return !h.Attracts(t, lb) && r.role(lb.UUID) == mover.Role{}
	})
	r.sync(lb)
	eventually(t, "a healthy load balancer's addresses are not attracted", func() bool { return h.Attracts(t, lb) })
	eventually(t, "attracting, yet no role or not Holding", func() bool { return r.role(lb.UUID) != mover.Role{} && r.holding() })
	r.do(func(m mover.Mover) {
		if err := m.Ready(); err != nil {
			t.Errorf("attracting, yet not ready: %v", err)
		}
		if h.Role != nil {
			h.Role(t, m, lb)
		}
	})
}

func testUnhealthy(t *testing.T, h Harness) {
	r, lb0, _ := attracting(t, h)
	serving := r.role(lb0.UUID)
	r.node.Set(lb0.UUID, false, true)
	eventually(t, "an unhealthy load balancer's addresses are still attracted", func() bool { return !h.Attracts(t, lb0) })
	eventually(t, "its role still says what it said while it served", func() bool { return r.role(lb0.UUID) != serving })
	r.node.Set(lb0.UUID, true, true)
	eventually(t, "healthy again, its addresses are not attracted again", func() bool { return h.Attracts(t, lb0) })
}

func testNeverServed(t *testing.T, h Harness) {
	r := start(t, h.New(t))
	lb0, lb1 := h.LB(t, 0), h.LB(t, 1)
	r.node.Set(lb0.UUID, true, true)
	r.sync(lb0)
	eventually(t, "a healthy load balancer is not attracted", func() bool { return h.Attracts(t, lb0) })
	r.node.Set(lb1.UUID, false, false) // placed, and its data plane never comes up
	r.sync(lb0, lb1)
	throughout(t, time.Second, "one that never served here took another's addresses away", func() bool { return h.Attracts(t, lb0) })
}

func testDrain(t *testing.T, h Harness) {
	r, lb0, lb1 := attracting(t, h)
	r.do(func(m mover.Mover) { m.Drain(context.Background(), true) })
	eventually(t, "draining, addresses still attracted or Holding", func() bool {
		return !h.Attracts(t, lb0) && !h.Attracts(t, lb1) && !r.holding()
	})
	r.do(func(m mover.Mover) { m.Drain(context.Background(), false) })
	eventually(t, "the drain ended, the addresses are not attracted again", func() bool { return h.Attracts(t, lb0) && h.Attracts(t, lb1) })
	if calls := r.node.reconnected(); len(calls) > 0 && calls[len(calls)-1] {
		t.Errorf("the drain ended, yet clients are still asked to reconnect: %v", calls)
	}
}

func testRemoved(t *testing.T, h Harness) {
	r, lb0, lb1 := attracting(t, h)
	r.sync(lb0)
	eventually(t, "a load balancer no longer placed here is still attracted", func() bool { return !h.Attracts(t, lb1) })
	eventually(t, "a load balancer no longer placed here keeps a role", func() bool { return r.role(lb1.UUID) == mover.Role{} })
	throughout(t, 500*time.Millisecond, "the one still placed let go", func() bool { return h.Attracts(t, lb0) })
}

func testCloseStop(t *testing.T, h Harness) {
	r, lb0, lb1 := attracting(t, h)
	r.stop()
	r.m.Close(context.Background(), true)
	eventually(t, "closed with stop, the addresses are still attracted", func() bool { return !h.Attracts(t, lb0) && !h.Attracts(t, lb1) })
}

func testCloseKeep(t *testing.T, h Harness) {
	r, lb0, _ := attracting(t, h)
	r.stop()
	r.m.Close(context.Background(), false)
	throughout(t, time.Second, "closed without stop, an address let go", func() bool { return h.Attracts(t, lb0) })
}
