package translate

import (
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// A namespace past its quota of Ingresses has its newest refused with
// QuotaExceeded naming the flag; what it is refused does not count for
// --max-ingresses, so another namespace's Ingresses are still served.
func TestIngressesPerNamespace(t *testing.T) {
	var ings = []struct{ ns, name string }{
		{"attacker", "a1"}, {"attacker", "a2"}, {"attacker", "a3"}, {"attacker", "a4"}, {"victim", "v1"}, {"victim", "v2"},
	}
	snap := snapshotOf()
	for i, x := range ings {
		ing := simpleIngress(t, x.ns, x.name, i, nil, x.name+".example", "/")
		snap.Ingresses = append(snap.Ingresses, ing)
		withBackends(snap, ing)
	}
	opts := DefaultOptions()
	opts.MaxIngresses, opts.MaxIngressesPerNamespace = 4, 2
	res := Ingresses(snap, opts)
	for _, x := range ings {
		_, ok := res.Accepted[model.IngressRef(x.ns, x.name)]
		if want := x.name != "a3" && x.name != "a4"; ok != want {
			t.Errorf("%s served: %v, want %v (%+v)", x.name, ok, want, problemsFor(res, x.name))
		}
	}
	for _, name := range []string{"a3", "a4"} {
		ps := problemsFor(res, name)
		if len(ps) != 1 || ps[0].Reason != ReasonQuotaExceeded || ps[0].Severity != model.SeverityError ||
			!strings.Contains(ps[0].Message, "--max-ingresses-per-namespace") {
			t.Errorf("%s: %+v, want one QuotaExceeded naming the flag", name, ps)
		}
	}
	// The global cap is still the last line.
	opts.MaxIngressesPerNamespace = 0
	res = Ingresses(snap, opts)
	if ps := problemsFor(res, "v1"); len(ps) != 1 || ps[0].Reason != "TooManyIngresses" {
		t.Errorf("without quota, v1: %+v, want TooManyIngresses", ps)
	}
}

// The defaults keep one namespace to a tenth of each global cap.
func TestDefaultQuotas(t *testing.T) {
	o := DefaultOptions()
	if o.MaxIngressesPerNamespace*10 != o.MaxIngresses || o.MaxHTTPRoutesPerNamespace*10 != o.MaxHTTPRoutes ||
		o.MaxGatewaysPerNamespace <= 0 || o.MaxRegexPathsPerNamespace <= 0 || o.MaxRegexPathsPerLoadBalancer <= 0 {
		t.Errorf("defaults %+v", o)
	}
}
