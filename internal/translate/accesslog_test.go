package translate

import (
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// The access-log annotation reaches the load balancer in its canonical
// form; in a group the most verbose member decides, and a bad value
// refuses the Ingress that carries it.
func TestAccessLogAnnotation(t *testing.T) {
	group := func(v string) map[string]string {
		ann := map[string]string{annotation.LoadBalancer: "shop"}
		if v != "" {
			ann[annotation.AccessLog] = v
		}
		return ann
	}
	cases := []struct{ a, b, want string }{
		{"", "", ""},
		{"off", "", "off"},
		{"sample=10", "sample=4", "sample=4"},
		{"off", "sample=4", "sample=4"},
		{"sample=4", "on", "on"},
		{"sample=1", "off", "on"},
	}
	for _, tt := range cases {
		a := simpleIngress(t, "default", "a", 0, group(tt.a), "a.example", "/")
		b := simpleIngress(t, "default", "b", 1, group(tt.b), "b.example", "/")
		res := Ingresses(snapshotOf(a, b), DefaultOptions())
		if lb := onlyLB(t, res); lb.AccessLog != tt.want {
			t.Errorf("%q + %q: %q, want %q", tt.a, tt.b, lb.AccessLog, tt.want)
		}
	}
	// ingress-nginx's switch, and pier's value winning over it.
	for ann, want := range map[string]string{"false": "off", "true": "on"} {
		ing := simpleIngress(t, "default", "n", 0, map[string]string{annotation.NginxPrefix + "enable-access-log": ann}, "a.example", "/")
		if lb := onlyLB(t, Ingresses(snapshotOf(ing), DefaultOptions())); lb.AccessLog != want {
			t.Errorf("enable-access-log %s: %q, want %q", ann, lb.AccessLog, want)
		}
	}
	both := simpleIngress(t, "default", "n", 0, map[string]string{annotation.NginxPrefix + "enable-access-log": "false", annotation.AccessLog: "sample=9"}, "a.example", "/")
	if lb := onlyLB(t, Ingresses(snapshotOf(both), DefaultOptions())); lb.AccessLog != "sample=9" {
		t.Errorf("pier.dev/access-log beside enable-access-log: %q", lb.AccessLog)
	}
	for _, bad := range []string{"yes", "sample=0", "sample=01", "sample=1000000", "on\n"} {
		ing := simpleIngress(t, "default", "bad", 0, map[string]string{annotation.AccessLog: bad}, "a.example", "/")
		res := Ingresses(snapshotOf(ing), DefaultOptions())
		if _, ok := res.Accepted[model.IngressRef("default", "bad")]; ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
