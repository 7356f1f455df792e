package cluster

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestAPIRate: the zero rate takes the command's default, a set rate is
// used as given, a half-set or negative one is refused, and apply leaves
// the caller's config alone.
func TestAPIRate(t *testing.T) {
	base := &rest.Config{Host: "https://api.example:6443"}
	got := APIRate{}.apply(base, DefaultControllerAPIRate)
	if got.QPS != 50 || got.Burst != 100 {
		t.Errorf("zero rate gave %g/%d, want the controller default 50/100", got.QPS, got.Burst)
	}
	got = APIRate{QPS: 7, Burst: 3}.apply(base, DefaultAgentAPIRate)
	if got.QPS != 7 || got.Burst != 3 {
		t.Errorf("set rate gave %g/%d, want 7/3", got.QPS, got.Burst)
	}
	if base.QPS != 0 || base.Burst != 0 {
		t.Errorf("apply changed the caller's config: %g/%d", base.QPS, base.Burst)
	}
	for _, bad := range []APIRate{{QPS: -1, Burst: 1}, {QPS: 5}, {Burst: 5}} {
		if err := bad.validate("--kube-api"); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := (APIRate{}).validate("--kube-api"); err != nil {
		t.Errorf("zero rate refused: %v", err)
	}
}
