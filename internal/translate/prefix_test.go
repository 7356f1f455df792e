package translate

import "testing"

func TestForwardedPrefix(t *testing.T) {
	a := simpleIngress(t, "ns", "a", 0, map[string]string{AnnotationLoadBalancer: "g",
		NginxPrefix + "x-forwarded-prefix": "/app", NginxPrefix + "rewrite-target": "/"}, "a.example", "/app")
	b := simpleIngress(t, "ns", "b", 1, map[string]string{AnnotationLoadBalancer: "g"}, "a.example", "/")
	for _, p := range onlyLB(t, Ingresses(snapshotOf(a, b), DefaultOptions())).Listeners[0].Policies {
		if p.Source.Name == "a" && (p.Options == nil || p.Options.ForwardedPrefix != "/app" || p.Options.RewritePath != "/") {
			t.Errorf("a: %+v", p.Options)
		}
		if p.Source.Name == "b" && p.Options != nil {
			t.Errorf("b: %+v", p.Options)
		}
	}
	for _, bad := range []string{"app", "/a b", "/$1", "/a%2F", "/a?x", "/a/../b", "/a;evil"} {
		if _, err := plainPath("x-forwarded-prefix", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
