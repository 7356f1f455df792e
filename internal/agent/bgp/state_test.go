package bgp

import (
	"context"
	"testing"

	"pier.dev/pier/internal/model"
)

// fixedNode is a data plane whose health the test sets; it has served
// unless neverServed.
type fixedNode struct{ healthy, neverServed bool }

func (n fixedNode) Healthy(string) bool             { return n.healthy }
func (n fixedNode) Served(string) bool              { return !n.neverServed }
func (n fixedNode) Reconnect(context.Context, bool) {}
func (n fixedNode) Wake()                           {}

// TestStateECMP: the rules of Mover.state, ECMP's among them. Only an
// ECMP mover advertises an ECMP placement with equal preference; a pair
// keeps its preference on the same mover; an unhealthy or draining node
// advertises nothing, ECMP or not; one that never served reports nothing
// either (a pair's standby would take it for a failure).
func TestStateECMP(t *testing.T) {
	pair := model.Placement{Active: "n0", Standby: "n1"}
	ecmp := model.Placement{Active: "n0", Standby: "n1", ECMP: []string{"n0", "n1", "n2"}}
	for _, tc := range []struct {
		name      string
		ecmpMode  bool
		node      string
		placement model.Placement
		healthy   bool
		draining  bool
		never     bool // never served
		want      model.BGPState
	}{
		{"ECMP placement, third node", true, "n2", ecmp, true, false, false, model.BGPECMP},
		{"ECMP placement, its active node", true, "n0", ecmp, true, false, false, model.BGPECMP},
		{"ECMP placement, table not current", true, "n2", ecmp, false, false, false, model.BGPWithdrawn},
		{"ECMP placement, draining", true, "n1", ecmp, true, true, false, model.BGPWithdrawn},
		{"ECMP placement, never served", true, "n2", ecmp, false, false, true, notYetServed},
		{"pair, active never served", false, "n0", pair, false, false, true, notYetServed},
		{"pair, standby never served, draining", false, "n1", pair, false, true, true, model.BGPWithdrawn},
		{"pair on an ECMP mover, active", true, "n0", pair, true, false, false, model.BGPPreferred},
		{"pair on an ECMP mover, standby", true, "n1", pair, true, false, false, model.BGPAdvertised},
		{"ECMP placement without ECMP mode, active", false, "n0", ecmp, true, false, false, model.BGPPreferred},
		{"ECMP placement without ECMP mode, other", false, "n2", ecmp, true, false, false, model.BGPAdvertised},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMover(MoverConfig{Node: tc.node, ECMP: tc.ecmpMode})
			m.node, m.draining = fixedNode{healthy: tc.healthy, neverServed: tc.never}, tc.draining
			lb := &model.LoadBalancer{UUID: "u", Provider: model.ProviderNative, VIP: "10.0.0.1", Placement: tc.placement}
			if got := m.state(lb); got != tc.want {
				t.Errorf("state = %q, want %q", got, tc.want)
			}
			want, _, _ := m.plan()
			if len(want) != 0 {
				t.Fatalf("nothing placed, yet routes %v", want)
			}
			m.placed = []*model.LoadBalancer{lb}
			routes, _, _ := m.plan()
			switch {
			case (tc.want == model.BGPWithdrawn || tc.want == notYetServed) && len(routes) != 0:
				t.Errorf("%q, yet routes %v", tc.want, routes)
			case tc.want != model.BGPWithdrawn && tc.want != notYetServed && (len(routes) != 1 || routes[0].Active != (tc.want != model.BGPAdvertised)):
				t.Errorf("routes %v for %q: an ECMP or preferred route has the active attributes", routes, tc.want)
			}
		})
	}
}
