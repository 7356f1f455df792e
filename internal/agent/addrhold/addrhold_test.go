package addrhold

import (
	"net/netip"
	"reflect"
	"testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/vrrp"
)

func placed(uuid, active, standby string, id int, vip, fip string) *model.LoadBalancer {
	return &model.LoadBalancer{UUID: uuid, VIP: vip, FIP: fip, Placement: model.Placement{
		Active: active, Standby: standby, RouterID: id, ActiveAddress: addrOf(active), StandbyAddress: addrOf(standby)}}
}

func addrOf(node string) string {
	switch node {
	case "n0":
		return "10.99.0.11"
	case "n1":
		return "10.99.0.12"
	case "n2":
		return "10.99.0.13"
	}
	return ""
}

// Load balancers on the same ordered pair share an instance; the reversed
// pair is another; what cannot move is skipped with its reason.
func TestPlan(t *testing.T) {
	lbs := []*model.LoadBalancer{
		placed("b", "n0", "n1", 7, "10.99.1.2", ""),
		placed("a", "n0", "n1", 7, "10.99.1.1", "10.99.2.1"),
		placed("c", "n1", "n0", 8, "10.99.1.3", ""),
		placed("d", "n1", "n2", 9, "10.99.1.4", ""), // not on n0
		placed("e", "n0", "", 0, "10.99.1.5", ""),
		placed("f", "n0", "n1", 7, "127.10.0.1", ""),
		{UUID: "g", VIP: "10.99.1.7", Placement: model.Placement{Active: "n0", Standby: "n1", RouterID: 7}},
	}
	instances, view, lone, skipped := Plan("n0", "eth0", lbs)
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	want := []vrrp.Instance{
		{Name: "vr7", RouterID: 7, Interface: "eth0", Priority: vrrp.PriorityActive, Source: a("10.99.0.11")[0],
			Peers: a("10.99.0.12"), Addresses: a("10.99.1.1", "10.99.1.2", "10.99.2.1")},
		{Name: "vr8", RouterID: 8, Interface: "eth0", Priority: vrrp.PriorityStandby, Source: a("10.99.0.11")[0],
			Peers: a("10.99.0.12"), Addresses: a("10.99.1.3")},
	}
	if !reflect.DeepEqual(instances, want) {
		t.Fatalf("instances:\n got %+v\nwant %+v", instances, want)
	}
	if instances[1].Priority != vrrp.PriorityStandby || view["vr8"].Active || view["vr8"].Peer != "n1" {
		t.Fatalf("reversed pair: %+v %+v", instances[1], view["vr8"])
	}
	if got := view["vr7"].UUIDs; !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("vr7 carries %v", got)
	}
	if got := lone["e"]; len(got) != 1 || got[0] != a("10.99.1.5")[0] || len(lone) != 1 {
		t.Errorf("lone = %v, want e's VIP alone", lone)
	}
	for _, uuid := range []string{"f", "g"} {
		if skipped[uuid] == "" {
			t.Errorf("%s not skipped", uuid)
		}
	}
	if _, ok := skipped["d"]; ok {
		t.Error("a load balancer not placed here was reported as skipped")
	}
	// The rendered config passes Validate.
	if _, err := vrrp.Render(vrrp.Config{Node: "n0", Dir: "/var/lib/pier/vrrp", Advert: vrrp.DefaultAdvert, Instances: instances}); err != nil {
		t.Fatal(err)
	}
}
