package translate

import (
	"reflect"
	"strings"
	"testing"

	"pier.dev/pier/internal/model"
)

// auth-url names a Service of the Ingress's namespace by its cluster DNS
// name: the Service port becomes a pool of the load balancer and each of
// the Ingress's policies carries ExternalAuth; another Ingress on the
// same host is left alone. Another namespace, https, a query or an
// invalid companion refuses that Ingress only.
func TestExternalAuth(t *testing.T) {
	app := simpleIngress(t, "ns", "app", 0, map[string]string{
		NginxPrefix + "auth-url":              "http://oauth2-proxy.ns.svc.cluster.local:4180/oauth2/auth",
		NginxPrefix + "auth-signin":           "https://login.example/oauth2/start",
		NginxPrefix + "auth-response-headers": "X-Auth-Request-User,X-Auth-Request-Email",
	}, "app.example", "/")
	other := simpleIngress(t, "ns", "other", 1, nil, "app.example", "/other")
	snap := snapshotOf(app, other)
	svc, es := backend("ns", "oauth2-proxy", "http", 4180, 1)
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	var refused []string
	for name, ann := range map[string]map[string]string{
		"cross":         {NginxPrefix + "auth-url": "http://oauth2-proxy.auth.svc/oauth2/auth"},
		"https":         {NginxPrefix + "auth-url": "https://oauth2-proxy.ns.svc/oauth2/auth"},
		"query":         {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/oauth2/auth?x=1"},
		"outside":       {NginxPrefix + "auth-url": "http://auth.example.com/check"},
		"method":        {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-method": "PATCH"},
		"signin":        {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-signin": "https://$host/start"},
		"headers":       {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-A,X-A"},
		"hdr-te":        {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, Transfer-Encoding"},
		"hdr-cl":        {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, content-length"},
		"hdr-host":      {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, Host"},
		"hdr-conn":      {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, Connection"},
		"hdr-upgrade":   {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, Upgrade"},
		"hdr-keepalive": {NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", NginxPrefix + "auth-response-headers": "X-User, Keep-Alive"},
	} {
		ing := simpleIngress(t, "ns", name, 2, ann, name+".example", "/")
		snap.Ingresses = append(snap.Ingresses, ing)
		refused = append(refused, name)
	}
	res := Ingresses(snap, DefaultOptions())
	authPool := model.ID("pool", "ns", "oauth2-proxy", "4180")
	var lb *model.LoadBalancer
	for _, l := range res.LoadBalancers {
		if l.UUID == res.Accepted[model.IngressRef("ns", "app")] {
			lb = l
		}
	}
	if lb == nil || lb.Pool(authPool) == nil || len(lb.Pool(authPool).Members) != 1 {
		t.Fatalf("no auth pool with its member: %+v", lb)
	}
	want := &model.ExternalAuth{PoolID: authPool, Host: "oauth2-proxy.ns.svc.cluster.local", Path: "/oauth2/auth", Method: "GET",
		SigninURL: "https://login.example/oauth2/start", ResponseHeaders: []string{"X-Auth-Request-User", "X-Auth-Request-Email"}}
	for _, p := range lb.Listeners[0].Policies {
		var got *model.ExternalAuth
		if p.Options != nil {
			got = p.Options.ExternalAuth
		}
		if p.Source.Name == "app" && !reflect.DeepEqual(got, want) || p.Source.Name == "other" && got != nil {
			t.Errorf("%s: external auth %+v", p.Source.Name, got)
		}
	}
	for _, name := range refused {
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; ok {
			t.Errorf("%s is served", name)
		}
		ps := problemsFor(res, name)
		if len(ps) == 0 || ps[0].Reason != "InvalidAnnotation" || !strings.Contains(ps[0].Field, "auth-") {
			t.Errorf("%s: problems %+v, want InvalidAnnotation on an auth- annotation", name, ps)
		}
		if strings.HasPrefix(name, "hdr-") && (len(ps) == 0 || !strings.Contains(ps[0].Message, "frames the message")) {
			t.Errorf("%s: problems %+v, want the framing header refused with its reason", name, ps)
		}
	}
}
