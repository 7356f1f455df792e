package translate

import (
	"reflect"
	"strings"
	"testing"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// default-backend names a Service of the Ingress's namespace: its first
// port becomes a pool of the load balancer, and each of the Ingress's
// policies carries it with the policy's own pool; another Ingress on the
// same host is left alone. A missing Service is a warning and changes
// nothing; an invalid name refuses that Ingress only.
func TestDefaultBackend(t *testing.T) {
	app := simpleIngress(t, "ns", "app", 0, map[string]string{annotation.NginxPrefix + "default-backend": "errors"}, "app.example", "/")
	app.Spec.Rules[0].HTTP.Paths = append(app.Spec.Rules[0].HTTP.Paths, *app.Spec.Rules[0].HTTP.Paths[0].DeepCopy())
	app.Spec.Rules[0].HTTP.Paths[1].Path = "/api"
	app.Spec.Rules[0].HTTP.Paths[1].Backend.Service.Name = "api"
	other := simpleIngress(t, "ns", "other", 1, nil, "app.example", "/other")
	missing := simpleIngress(t, "ns", "missing", 2, map[string]string{annotation.NginxPrefix + "default-backend": "nope"}, "m.example", "/")
	bad := simpleIngress(t, "ns", "bad", 3, map[string]string{annotation.NginxPrefix + "default-backend": "errors;evil"}, "b.example", "/")
	cross := simpleIngress(t, "ns", "cross", 4, map[string]string{annotation.Prefix + "default-backend": "kube-system/errors"}, "c.example", "/")
	snap := snapshotOf(app, other, missing, bad, cross)
	svc, es := backend("ns", "errors", "", 8080, 1)
	svc.Spec.Ports = append(svc.Spec.Ports, svc.Spec.Ports[0])
	svc.Spec.Ports[1].Port = 9090
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	res := Ingresses(snap, DefaultOptions())

	errorsPool := model.ID("pool", "ns", "errors", "8080")
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.UUID == res.Accepted[model.IngressRef("ns", "app")] {
			lb = l
		}
	}
	if lb == nil || lb.Pool(errorsPool) == nil {
		t.Fatalf("no pool for errors' first port: %+v", lb)
	}
	if n := len(lb.Pool(errorsPool).Members); n != 1 {
		t.Errorf("errors pool has %d members, want 1", n)
	}
	for _, p := range lb.Listeners[0].Policies {
		var want *model.DefaultBackend
		switch p.Rules[len(p.Rules)-1].Value {
		case "/":
			want = &model.DefaultBackend{PoolID: errorsPool, RoutePoolID: model.ID("pool", "ns", "web", "80")}
		case "/api":
			want = &model.DefaultBackend{PoolID: errorsPool, RoutePoolID: model.ID("pool", "ns", "api", "80")}
		}
		var got *model.DefaultBackend
		if p.Options != nil {
			got = p.Options.DefaultBackend
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("policy %v: default backend %+v, want %+v", p.Rules, got, want)
		}
	}
	if _, ok := res.Accepted[model.IngressRef("ns", "missing")]; !ok {
		t.Error("an Ingress whose default-backend Service is missing is not served")
	}
	if ps := problemsFor(res, "missing"); len(ps) != 1 || ps[0].Reason != "ServiceNotFound" || ps[0].Severity != model.SeverityWarning {
		t.Errorf("missing: problems %+v, want one ServiceNotFound warning", ps)
	}
	for _, name := range []string{"bad", "cross"} {
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; ok {
			t.Errorf("%s is served", name)
		}
		ps := problemsFor(res, name)
		if len(ps) != 1 || ps[0].Reason != "InvalidAnnotation" || !strings.Contains(ps[0].Field, "default-backend") {
			t.Errorf("%s: problems %+v, want InvalidAnnotation on default-backend", name, ps)
		}
	}
}
