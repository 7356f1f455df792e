package translate

import (
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// Rate limits reach only their Ingress's policies; 0 is off; a bad value
// refuses the Ingress with the field named.
func TestRateLimit(t *testing.T) {
	group := map[string]string{annotation.LoadBalancer: "shared"}
	limited := map[string]string{annotation.LoadBalancer: "shared", annotation.NginxPrefix + "limit-rps": "5",
		annotation.Prefix + "limit-rpm": "100", annotation.NginxPrefix + "limit-connections": "0"}
	a := simpleIngress(t, "ns", "limited", 0, limited, "a.example", "/api")
	b := simpleIngress(t, "ns", "open", 1, group, "a.example", "/")
	lb := onlyLB(t, Ingresses(snapshotOf(a, b), DefaultOptions()))
	for _, p := range lb.Listeners[0].Policies {
		switch p.Source.Name {
		case "limited":
			if p.Options == nil || p.Options.RateLimit == nil ||
				*p.Options.RateLimit != (model.RateLimit{RequestsPerSecond: 5, RequestsPerMinute: 100}) {
				t.Errorf("limited: %+v", p.Options)
			}
		default:
			if p.Options != nil {
				t.Errorf("open: %+v", p.Options)
			}
		}
	}
	off := simpleIngress(t, "ns", "off", 0, map[string]string{annotation.NginxPrefix + "limit-rps": "0"}, "b.example", "/")
	if o := onlyLB(t, Ingresses(snapshotOf(off), DefaultOptions())).Listeners[0].Policies[0].Options; o != nil {
		t.Errorf("limit-rps 0: options %+v", o)
	}
	for _, bad := range []string{"-1", "1000001", "1.5", "10r/s", "5 ", "0x10", ""} {
		bad := simpleIngress(t, "ns", "bad", 0, map[string]string{annotation.NginxPrefix + "limit-rps": bad}, "c.example", "/")
		res := Ingresses(snapshotOf(bad), DefaultOptions())
		ps := problemsFor(res, "bad")
		if len(res.LoadBalancers) != 0 || len(ps) != 1 || ps[0].Field != "metadata.annotations["+annotation.NginxPrefix+"limit-rps]" {
			t.Errorf("limit-rps %q: %d load balancers, problems %+v", bad.Annotations[annotation.NginxPrefix+"limit-rps"], len(res.LoadBalancers), ps)
		}
	}
}
