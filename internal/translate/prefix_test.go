package translate

import (
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

func TestForwardedPrefix(t *testing.T) {
	a := simpleIngress(t, "ns", "a", 0, map[string]string{annotation.LoadBalancer: "g",
		annotation.NginxPrefix + "x-forwarded-prefix": "/app", annotation.NginxPrefix + "rewrite-target": "/"}, "a.example", "/app")
	b := simpleIngress(t, "ns", "b", 1, map[string]string{annotation.LoadBalancer: "g"}, "a.example", "/")
	for _, p := range onlyLB(t, Ingresses(snapshotOf(a, b), DefaultOptions())).Listeners[0].Policies {
		if p.Source.Name == "a" && (p.Options == nil || p.Options.ForwardedPrefix != "/app" || p.Options.RewritePath != "/") {
			t.Errorf("a: %+v", p.Options)
		}
		if p.Source.Name == "b" && p.Options != nil {
			t.Errorf("b: %+v", p.Options)
		}
	}
	for _, bad := range []string{"app", "/a b", "/$1", "/a%2F", "/a?x", "/a/../b", "/a;evil"} {
		if _, err := annotation.PlainPath("x-forwarded-prefix", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The prefix-strip form: paths "P(/|$)(.*)" with rewrite-target "T$2"
// (with or without use-regex true) route as Prefix P and carry T and P.
func TestRewriteStripForm(t *testing.T) {
	for _, ann := range []map[string]string{
		{annotation.NginxPrefix + "rewrite-target": "/$2", annotation.NginxPrefix + "use-regex": "true"},
		{annotation.Prefix + "rewrite-target": "/$2"},
	} {
		ing := simpleIngress(t, "ns", "a", 0, ann, "a.example", "/shop.v1(/|$)(.*)")
		lb := onlyLB(t, Ingresses(snapshotOf(ing), DefaultOptions()))
		p := lb.Listeners[0].Policies[0]
		last := p.Rules[len(p.Rules)-1]
		if last.Value != "/shop.v1" || last.Compare != model.CompareStartsWith {
			t.Errorf("%v: routed as %+v, want Prefix /shop.v1", ann, last)
		}
		if o := p.Options; o == nil || o.RewritePath != "/" || o.StripPrefix != "/shop.v1" {
			t.Errorf("%v: options %+v", ann, o)
		}
	}
	for _, bad := range []string{"/(/|$)(.*)", "/a/(/|$)(.*)", "(/|$)(.*)", "/a(/|$)(.+)", "/a;b(/|$)(.*)", "/a(/|$)(.*)x", "/A B(/|$)(.*)"} {
		if _, err := parseStripPath(bad); err == nil {
			t.Errorf("path %q accepted", bad)
		}
	}
}
