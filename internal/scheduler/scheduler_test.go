package scheduler

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

func TestPlace(t *testing.T) {
	lb := func(active, standby string) *model.LoadBalancer {
		return &model.LoadBalancer{Name: "x", Provider: model.ProviderHAProxy,
			Placement: model.Placement{Active: active, Standby: standby}}
	}
	tests := []struct {
		name   string
		lb     *model.LoadBalancer
		ready  []string
		drain  []string
		load   map[string]int
		want   model.Placement
		errMsg string
	}{
		{"new, two nodes", lb("", ""), []string{"b", "a"}, nil, nil, model.Placement{Active: "a", Standby: "b"}, ""},
		{"new, least loaded first", lb("", ""), []string{"a", "b", "c"}, nil, map[string]int{"a": 3, "b": 1}, model.Placement{Active: "c", Standby: "b"}, ""},
		{"kept while nodes live", lb("b", "c"), []string{"a", "b", "c"}, nil, map[string]int{"b": 9, "c": 9}, model.Placement{Active: "b", Standby: "c"}, ""},
		{"standby lost", lb("b", "c"), []string{"a", "b"}, nil, nil, model.Placement{Active: "b", Standby: "a"}, ""},
		{"active lost: standby promoted", lb("b", "c"), []string{"a", "c"}, nil, nil, model.Placement{Active: "c", Standby: "a"}, ""},
		{"single node", lb("", ""), []string{"local"}, nil, nil, model.Placement{Active: "local"}, ""},
		{"single node keeps", lb("local", "gone"), []string{"local"}, nil, nil, model.Placement{Active: "local"}, ""},
		{"no node", lb("", ""), nil, nil, nil, model.Placement{}, "no ready node"},
		{"draining keeps both roles", lb("a", "b"), []string{"a", "b", "c"}, []string{"a", "b"}, nil, model.Placement{Active: "a", Standby: "b"}, ""},
		{"new: draining node skipped", lb("", ""), []string{"a", "b", "c"}, []string{"a"}, nil, model.Placement{Active: "b", Standby: "c"}, ""},
		{"new: draining never standby", lb("", ""), []string{"a", "b"}, []string{"a"}, nil, model.Placement{Active: "b"}, ""},
		{"standby lost: draining not chosen", lb("a", "c"), []string{"a", "b", "d"}, []string{"b"}, map[string]int{"d": 5}, model.Placement{Active: "a", Standby: "d"}, ""},
		{"active lost, draining standby stays standby", lb("a", "b"), []string{"b", "c"}, []string{"b"}, nil, model.Placement{Active: "c", Standby: "b"}, ""},
		{"active lost, draining standby alone: promoted", lb("a", "b"), []string{"b"}, []string{"b"}, nil, model.Placement{Active: "b"}, ""},
		{"active lost, healthy standby promoted", lb("a", "b"), []string{"b", "c"}, []string{"c"}, nil, model.Placement{Active: "b"}, ""},
		{"every node cordoned", lb("", ""), []string{"a", "b"}, []string{"a", "b"}, nil, model.Placement{}, "every ready node is cordoned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nodes := Nodes{Ready: tt.ready, Draining: map[string]bool{}}
			for _, n := range tt.drain {
				nodes.Draining[n] = true
			}
			got, err := Place(tt.lb, nodes, counted(Load{Placed: tt.load, Active: tt.load}))
			if tt.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errMsg) {
					t.Fatalf("err = %v, want %q", err, tt.errMsg)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Place = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func counted(l Load) func() Load { return func() Load { return l } }

// TestLoadCountedOnlyToChoose: a placement that keeps its nodes, or has
// one node for a role, does not ask for the load (counting it is linear in
// the load balancers); one that chooses among several does.
func TestLoadCountedOnlyToChoose(t *testing.T) {
	tests := []struct {
		name      string
		placement model.Placement
		ready     []string
		counts    bool
	}{
		{"pair kept", model.Placement{Active: "a", Standby: "b"}, []string{"a", "b", "c"}, false},
		{"one node (pier run)", model.Placement{Active: "a"}, []string{"a"}, false},
		{"new on one node", model.Placement{}, []string{"a"}, false},
		{"standby lost, one node left to take it", model.Placement{Active: "a", Standby: "b"}, []string{"a", "c"}, false},
		{"new on two nodes", model.Placement{}, []string{"a", "b"}, true},
		{"standby lost, two nodes to choose from", model.Placement{Active: "a", Standby: "b"}, []string{"a", "c", "d"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			load := func() Load { calls++; return LoadOf(nil) }
			lb := &model.LoadBalancer{Name: "x", Provider: model.ProviderHAProxy, Placement: tt.placement}
			if _, err := Place(lb, Nodes{Ready: tt.ready}, load); err != nil {
				t.Fatal(err)
			}
			if got := calls > 0; got != tt.counts {
				t.Fatalf("load counted %d times, want counted: %v", calls, tt.counts)
			}
		})
	}
}

// Native load balancers are placed like haproxy ones; a provider with no
// driver is still refused.
func TestNativePlacedAsPair(t *testing.T) {
	nodes := Nodes{Ready: []string{"a", "b"}}
	native, err := Place(&model.LoadBalancer{Provider: model.ProviderNative}, nodes, counted(LoadOf(nil)))
	if err != nil {
		t.Fatal(err)
	}
	ha, _ := Place(&model.LoadBalancer{Provider: model.ProviderHAProxy}, nodes, counted(LoadOf(nil)))
	if !reflect.DeepEqual(native, ha) || native.Active == "" || native.Standby == "" {
		t.Fatalf("native placed %+v, haproxy %+v", native, ha)
	}
	_, err = Place(&model.LoadBalancer{Provider: "bgp"}, nodes, counted(LoadOf(nil)))
	if !errors.Is(err, ErrUnsupportedProvider) {
		t.Fatalf("err = %v", err)
	}
}

// With two nodes, the active role alternates: neither node carries every
// load balancer's traffic (no node is active for far more than its
// share), and with three, each is active for a third.
func TestActivesSpread(t *testing.T) {
	for _, nodes := range [][]string{{"a", "b"}, {"a", "b", "c"}} {
		load := LoadOf(nil)
		for i := range 30 {
			p, err := Place(&model.LoadBalancer{Name: fmt.Sprint(i), Provider: model.ProviderHAProxy}, Nodes{Ready: nodes}, counted(load))
			if err != nil {
				t.Fatal(err)
			}
			load.Add(p)
		}
		for _, n := range nodes {
			if got, want := load.Active[n], 30/len(nodes); got != want {
				t.Errorf("%d nodes: %s is active for %d of 30, want %d (actives %v)", len(nodes), n, got, want, load.Active)
			}
			if got, want := load.Placed[n], 60/len(nodes); got != want {
				t.Errorf("%d nodes: %s has %d placements, want %d", len(nodes), n, got, want)
			}
		}
	}
}

// TestPlaceECMP: with NativeECMP a native load balancer is placed on
// every ready node that does not drain, keeps the draining nodes it was
// on (they withdraw their routes but serve the flows still sent to them),
// and is given no new draining node; haproxy load balancers stay pairs.
func TestPlaceECMP(t *testing.T) {
	nodes := Nodes{Ready: []string{"c", "a", "b", "d"}, Draining: map[string]bool{"d": true}, NativeECMP: true}
	lb := &model.LoadBalancer{Name: "x", Provider: model.ProviderNative}
	p, err := Place(lb, nodes, counted(LoadOf(nil)))
	if err != nil {
		t.Fatal(err)
	}
	want := model.Placement{Active: "a", Standby: "b", ECMP: []string{"a", "b", "c"}}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("placed %+v, want %+v", p, want)
	}
	for _, n := range []string{"a", "b", "c"} {
		if !p.Has(n) {
			t.Errorf("placement does not name %s", n)
		}
	}
	if p.Has("d") {
		t.Error("a new load balancer placed on a draining node")
	}
	// b drains, e comes: b keeps serving, e joins.
	lb.Placement = p
	nodes = Nodes{Ready: []string{"a", "b", "c", "e"}, Draining: map[string]bool{"b": true}, NativeECMP: true}
	if p, err = Place(lb, nodes, counted(LoadOf(nil))); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c", "e"}; !reflect.DeepEqual(p.ECMP, want) {
		t.Fatalf("after a drain and a new node: %v, want %v", p.ECMP, want)
	}
	// c is gone.
	lb.Placement = p
	if p, _ = Place(lb, Nodes{Ready: []string{"a", "b", "e"}, NativeECMP: true}, counted(LoadOf(nil))); !reflect.DeepEqual(p.ECMP, []string{"a", "b", "e"}) {
		t.Fatalf("after c went: %v", p.ECMP)
	}
	if _, err := Place(&model.LoadBalancer{Name: "y", Provider: model.ProviderNative}, Nodes{Ready: []string{"a"}, Draining: map[string]bool{"a": true}, NativeECMP: true}, counted(LoadOf(nil))); err == nil {
		t.Fatal("placed a new load balancer on cordoned nodes only")
	}
	ha, err := Place(&model.LoadBalancer{Name: "z", Provider: model.ProviderHAProxy}, nodes, counted(LoadOf(nil)))
	if err != nil || len(ha.ECMP) != 0 || ha.Standby == "" {
		t.Fatalf("haproxy placed %+v, %v with NativeECMP", ha, err)
	}
}
