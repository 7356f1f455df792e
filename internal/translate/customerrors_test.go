package translate

import (
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// custom-http-errors with default-backend: each policy of the Ingress
// carries the codes, the default-backend pool and the route's own
// namespace, Ingress, Service and port (for X-Namespace and the others),
// except its route to the default-backend Service itself; another
// Ingress on the same host is left alone. Without a usable
// default-backend it is a warning and changes nothing; an invalid list
// refuses that Ingress only, naming the field.
func TestCustomHTTPErrors(t *testing.T) {
	app := simpleIngress(t, "ns", "app", 0, map[string]string{annotation.NginxPrefix + "default-backend": "errors",
		annotation.NginxPrefix + "custom-http-errors": "503, 404,404"}, "app.example", "/")
	app.Spec.Rules[0].HTTP.Paths = append(app.Spec.Rules[0].HTTP.Paths, *app.Spec.Rules[0].HTTP.Paths[0].DeepCopy())
	app.Spec.Rules[0].HTTP.Paths[1].Path = "/errors"
	app.Spec.Rules[0].HTTP.Paths[1].Backend.Service.Name = "errors"
	app.Spec.Rules[0].HTTP.Paths[1].Backend.Service.Port.Number = 8080
	other := simpleIngress(t, "ns", "other", 1, nil, "app.example", "/other")
	alone := simpleIngress(t, "ns", "alone", 2, map[string]string{annotation.NginxPrefix + "custom-http-errors": "404"}, "a.example", "/")
	missing := simpleIngress(t, "ns", "missing", 3, map[string]string{annotation.NginxPrefix + "default-backend": "nope",
		annotation.Prefix + "custom-http-errors": "404"}, "m.example", "/")
	objs := []*networkingv1.Ingress{app, other, alone, missing}
	badValues := []string{"404;evil", "404,200", "404,600", "40", "4040", "abc", "", "404,,503", "404 503", "+404", "4e2",
		"400,401,402,403,404,405,406,407,408,409,410,411,412,413,414,415,416,417,418,421,422,423,424,425,426,428,429,431,451,500,501,502,503"}
	var bad []string
	for i, v := range badValues {
		name := "bad" + string(rune('a'+i))
		bad = append(bad, name)
		objs = append(objs, simpleIngress(t, "ns", name, 4+i, map[string]string{annotation.NginxPrefix + "default-backend": "errors",
			annotation.NginxPrefix + "custom-http-errors": v}, name+".example", "/"))
	}
	snap := snapshotOf(objs...)
	svc, es := backend("ns", "errors", "", 8080, 1)
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	res := Ingresses(snap, DefaultOptions())

	errorsPool := model.ID("pool", "ns", "errors", "8080")
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.UUID == res.Accepted[model.IngressRef("ns", "app")] {
			lb = l
		}
	}
	if lb == nil {
		t.Fatal("app not served")
	}
	seen, self := 0, 0
	for _, p := range lb.Listeners[0].Policies {
		if p.Rules[len(p.Rules)-1].Value == "/errors" {
			self++
		}
		var got *model.CustomErrors
		if p.Options != nil {
			got = p.Options.CustomErrors
		}
		var want *model.CustomErrors
		if p.Source.Name == "app" && p.Rules[len(p.Rules)-1].Value == "/" { // not the route to errors itself
			want = &model.CustomErrors{PoolID: errorsPool, Codes: []int{404, 503}, Namespace: "ns", Ingress: "app",
				Service: "web", ServicePort: "80"}
			seen++
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("policy %s %v: custom errors %+v, want %+v", p.Source.Name, p.Rules, got, want)
		}
	}
	if seen == 0 || self == 0 {
		t.Errorf("%d policies of app to web, %d to errors, want both", seen, self)
	}
	for _, name := range []string{"alone", "missing"} {
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; !ok {
			t.Errorf("%s is not served", name)
		}
		found := false
		for _, ps := range problemsFor(res, name) {
			if ps.Severity == model.SeverityError {
				t.Errorf("%s: %+v", name, ps)
			}
			if ps.Reason == "IgnoredAnnotation" && strings.Contains(ps.Field, "custom-http-errors") {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: problems %+v, want an IgnoredAnnotation warning on custom-http-errors", name, problemsFor(res, name))
		}
	}
	for _, name := range bad {
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; ok {
			t.Errorf("%s is served", name)
		}
		ps := problemsFor(res, name)
		if len(ps) != 1 || ps[0].Reason != "InvalidAnnotation" || !strings.Contains(ps[0].Field, "custom-http-errors") {
			t.Errorf("%s: problems %+v, want InvalidAnnotation on custom-http-errors", name, ps)
		}
	}
}
