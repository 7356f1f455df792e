package nativedriver

import (
	"testing"

	"pier.dev/pier/internal/model"
)

// TestServicesConsistentForECMP: the services of a load balancer placed
// on a set of nodes (ECMP) pick by a consistent hash; a pair's do not.
func TestServicesConsistentForECMP(t *testing.T) {
	lb := &model.LoadBalancer{UUID: "0e0c0f00-0000-4000-8000-000000000001", Provider: model.ProviderNative, VIP: "10.0.0.1",
		Listeners: []model.Listener{{Protocol: model.ProtocolTCP, Port: 80, DefaultPoolID: "p"}},
		Pools:     []model.Pool{{ID: "p", Members: []model.Member{{Address: "10.1.0.1", Port: 8080}}}},
		Placement: model.Placement{Active: "n0", Standby: "n1"}}
	for _, ecmp := range []bool{false, true} {
		if ecmp {
			lb.Placement.ECMP = []string{"n0", "n1", "n2"}
		}
		svcs, err := services(lb)
		if err != nil {
			t.Fatal(err)
		}
		if len(svcs) != 1 || svcs[0].Consistent != ecmp {
			t.Errorf("ECMP placement %v: services %+v, want Consistent %v", ecmp, svcs, ecmp)
		}
	}
}
