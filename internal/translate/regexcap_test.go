package translate

import (
	"strconv"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// regexIngress is an Ingress of group g with n use-regex paths.
func regexIngress(t *testing.T, ns, name string, age int, g string, n int) *networkingv1.Ingress {
	t.Helper()
	ann := map[string]string{annotation.LoadBalancer: g}
	if n > 0 {
		ann[annotation.NginxPrefix+"use-regex"] = "true"
	}
	ing := simpleIngress(t, ns, name, age, ann, name+".example", "/p0/(.*)")
	paths := &ing.Spec.Rules[0].HTTP.Paths
	for i := 1; i < max(n, 1); i++ {
		p := (*paths)[0]
		p.Path = "/p" + strconv.Itoa(i) + "/(.*)"
		*paths = append(*paths, p)
	}
	return ing
}

// TestRegexPathCaps: oldest first, an Ingress whose regular-expression
// paths would take its load balancer or its namespace past the cap is
// refused with TooManyRegexPaths; a refused one counts for neither.
func TestRegexPathCaps(t *testing.T) {
	opts := DefaultOptions()
	opts.MaxRegexPathsPerLoadBalancer, opts.MaxRegexPathsPerNamespace = 3, 5
	snap := snapshotOf(
		regexIngress(t, "a", "one", 0, "g", 2),
		regexIngress(t, "a", "two", 1, "g", 2),   // g would hold 4
		regexIngress(t, "a", "three", 2, "h", 3), // a holds 5
		regexIngress(t, "a", "four", 3, "k", 1),  // a would hold 6
		regexIngress(t, "a", "plain", 4, "k", 0),
		regexIngress(t, "b", "six", 5, "g", 3),
	)
	res := Ingresses(snap, opts)
	for name, refused := range map[string]string{"one": "", "two": "load balancer", "three": "", "four": "namespace a",
		"plain": "", "six": ""} {
		ns := "a"
		if name == "six" {
			ns = "b"
		}
		var msg string
		for _, p := range res.Problems {
			if p.Name == name && p.Reason == "TooManyRegexPaths" {
				msg = p.Message
			}
		}
		switch {
		case refused == "" && msg != "":
			t.Errorf("%s refused: %s", name, msg)
		case refused != "" && !strings.Contains(msg, refused):
			t.Errorf("%s: problem %q, want one naming its %s", name, msg, refused)
		}
		if _, ok := res.Accepted[model.IngressRef(ns, name)]; ok != (refused == "") {
			t.Errorf("%s: accepted %v", name, ok)
		}
	}
	// Where a cap may bite, a change is translated in full: the
	// refusals cross load balancers.
	classes := ourClasses(snap.IngressClasses, opts)
	if !regexCapMayBite(snap.Ingresses, classes, opts) {
		t.Error("caps that refuse Ingresses do not make the fast path decline")
	}
	if regexCapMayBite(snap.Ingresses[:1], classes, opts) {
		t.Error("2 regex paths under caps of 3 and 5 make the fast path decline")
	}
	if next := snapshotOf(snap.Ingresses[1:]...); func() bool { _, ok := IngressChanges(res, snap, next, opts); return ok }() {
		t.Error("removing the oldest regex Ingress (which makes room for two) was patched incrementally")
	}
}
