package bgp

import (
	"context"
	"testing"

	"pier.dev/pier/internal/model"
)

// fakeNode is a data plane whose health the test sets; it has served
// once it was healthy at a tick (the agent records it so).
type fakeNode struct{ healthy, served bool }

func (n *fakeNode) Healthy(string) bool             { return n.healthy }
func (n *fakeNode) Served(string) bool              { return n.served }
func (n *fakeNode) Reconnect(context.Context, bool) {}
func (n *fakeNode) Wake()                           {}

// pairSide is one node's mover policy, without a speaker: what state
// computes from the load balancer's status as the other node reported it.
type pairSide struct {
	m    *Mover
	data *fakeNode
}

func newPairSide(node string, preempt bool) *pairSide {
	s := &pairSide{data: &fakeNode{healthy: true, served: true}}
	s.m = NewMover(MoverConfig{Node: node, Preempt: preempt})
	s.m.node = s.data
	return s
}

// tick computes this side's state for lb and records it, as Tick does.
func (s *pairSide) tick(lb *model.LoadBalancer) model.BGPState {
	s.data.served = s.data.served || s.data.healthy
	st := s.m.state(lb)
	s.m.states = map[string]model.BGPState{lb.UUID: st}
	return st
}

// TestNoPreemptKeepsTheTrafficWhereItIs walks a pair through the active
// node's failure and return: without Preempt the standby takes the
// preference when the active reports its routes withdrawn and keeps it
// when the active serves again (no second move), and gives it back only
// when its own data plane fails; with Preempt the active takes it back
// at once. Each side sees the other only through its report in the
// load balancer's status, as the agents do.
func TestNoPreemptKeepsTheTrafficWhereItIs(t *testing.T) {
	for _, preempt := range []bool{false, true} {
		a, b := newPairSide("a", preempt), newPairSide("b", preempt)
		lb := &model.LoadBalancer{UUID: "u", VIP: "10.0.0.1", Placement: model.Placement{Active: "a", Standby: "b"}}
		step := func(what string, wantA, wantB model.BGPState) {
			t.Helper()
			// Two rounds: each side reports, then reads the other's report.
			var sa, sb model.BGPState
			for range 2 {
				sa, sb = a.tick(lb), b.tick(lb)
				lb.Status = model.Status{Nodes: []model.NodeStatus{{Node: "a", BGP: sa}, {Node: "b", BGP: sb}}}
			}
			if sa != wantA || sb != wantB {
				t.Errorf("preempt %v, %s: a %s, b %s; want a %s, b %s", preempt, what, sa, sb, wantA, wantB)
			}
		}
		step("both serve", model.BGPPreferred, model.BGPAdvertised)
		a.data.healthy = false
		if preempt {
			// The standby's routes, the only ones left, take the traffic
			// at their lower preference; the active's take it back.
			step("the active's HAProxy fails", model.BGPWithdrawn, model.BGPAdvertised)
			a.data.healthy = true
			step("the active serves again", model.BGPPreferred, model.BGPAdvertised)
			continue
		}
		step("the active's HAProxy fails", model.BGPWithdrawn, model.BGPPreferred)
		a.data.healthy = true
		step("the active serves again", model.BGPAdvertised, model.BGPPreferred)
		b.data.healthy = false
		step("the standby's HAProxy fails", model.BGPPreferred, model.BGPWithdrawn)
		b.data.healthy = true
		step("the standby serves again", model.BGPPreferred, model.BGPAdvertised)
	}
}

// TestNoPreemptWithoutReports: a standby that cannot read the active's
// report (the API server away, or a new agent) does not take the
// preference on its own, and an active without the standby's report
// prefers its routes: nothing is decided on a report nobody wrote.
func TestNoPreemptWithoutReports(t *testing.T) {
	a, b := newPairSide("a", false), newPairSide("b", false)
	lb := &model.LoadBalancer{UUID: "u", VIP: "10.0.0.1", Placement: model.Placement{Active: "a", Standby: "b"}}
	if got := a.tick(lb); got != model.BGPPreferred {
		t.Errorf("active without reports: %s, want %s", got, model.BGPPreferred)
	}
	if got := b.tick(lb); got != model.BGPAdvertised {
		t.Errorf("standby without reports: %s, want %s", got, model.BGPAdvertised)
	}
}

// TestNoPreemptSurvivesAnAgentRestart: the standby that took over keeps
// the preference when its agent restarts (its new mover reads its own
// last report), so a graceful restart moves no traffic.
func TestNoPreemptSurvivesAnAgentRestart(t *testing.T) {
	a := newPairSide("a", false)
	lb := &model.LoadBalancer{UUID: "u", VIP: "10.0.0.1", Placement: model.Placement{Active: "a", Standby: "b"},
		Status: model.Status{Nodes: []model.NodeStatus{{Node: "a", BGP: model.BGPAdvertised}, {Node: "b", BGP: model.BGPPreferred}}}}
	b := newPairSide("b", false) // a new agent: no state of its own yet
	if got := b.tick(lb); got != model.BGPPreferred {
		t.Errorf("restarted standby that had taken over: %s, want %s", got, model.BGPPreferred)
	}
	if got := a.tick(lb); got != model.BGPAdvertised {
		t.Errorf("active beside it: %s, want %s", got, model.BGPAdvertised)
	}
}

// TestColdStartKeepsThePlacement: at a cold start the standby's HAProxy
// often serves a moment before the active's. The active, not serving yet,
// reports nothing rather than withdrawn, so the standby does not take
// the preference for a failure that never was, and once the active
// serves, the preference is where the placement puts it.
func TestColdStartKeepsThePlacement(t *testing.T) {
	a, b := newPairSide("a", false), newPairSide("b", false)
	a.data.healthy, a.data.served = false, false
	lb := &model.LoadBalancer{UUID: "u", VIP: "10.0.0.1", Placement: model.Placement{Active: "a", Standby: "b"}}
	report := func(sa, sb model.BGPState) {
		lb.Status = model.Status{Nodes: []model.NodeStatus{{Node: "a", BGP: sa}, {Node: "b", BGP: sb}}}
	}
	for range 3 {
		sa, sb := a.tick(lb), b.tick(lb)
		report(sa, sb)
		if sa != notYetServed || sb != model.BGPAdvertised {
			t.Fatalf("the active not serving yet: a %q, b %q; want a %q (nothing), b advertised", sa, sb, notYetServed)
		}
	}
	a.data.healthy = true
	for range 2 {
		sa, sb := a.tick(lb), b.tick(lb)
		report(sa, sb)
		if sa != model.BGPPreferred || sb != model.BGPAdvertised {
			t.Fatalf("the active serving: a %s, b %s; want a preferred, b advertised", sa, sb)
		}
	}
	// Once it has served, a failure is a failure: the standby takes over.
	a.data.healthy = false
	var sa, sb model.BGPState
	for range 2 {
		sa, sb = a.tick(lb), b.tick(lb)
		report(sa, sb)
	}
	if sa != model.BGPWithdrawn || sb != model.BGPPreferred {
		t.Fatalf("the active failed after serving: a %s, b %s; want a withdrawn, b preferred", sa, sb)
	}
}
