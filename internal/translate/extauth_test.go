package translate

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/tlscert"
)

// auth-url names a Service of the Ingress's namespace by its cluster DNS
// name: the Service port becomes a pool of the load balancer and each of
// the Ingress's policies carries ExternalAuth; another Ingress on the
// same host is left alone. Another namespace, https, a query or an
// invalid companion refuses that Ingress only.
func TestExternalAuth(t *testing.T) {
	app := simpleIngress(t, "ns", "app", 0, map[string]string{
		annotation.NginxPrefix + "auth-url":              "http://oauth2-proxy.ns.svc.cluster.local:4180/oauth2/auth",
		annotation.NginxPrefix + "auth-signin":           "https://login.example/oauth2/start",
		annotation.NginxPrefix + "auth-response-headers": "X-Auth-Request-User,X-Auth-Request-Email",
	}, "app.example", "/")
	other := simpleIngress(t, "ns", "other", 1, nil, "app.example", "/other")
	snap := snapshotOf(app, other)
	svc, es := backend("ns", "oauth2-proxy", "http", 4180, 1)
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	var refused []string
	for name, ann := range map[string]map[string]string{
		"cross":         {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.auth.svc/oauth2/auth"},
		"https":         {annotation.NginxPrefix + "auth-url": "https://oauth2-proxy.ns.svc/oauth2/auth"},
		"query":         {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/oauth2/auth?x=1"},
		"outside":       {annotation.NginxPrefix + "auth-url": "http://auth.example.com/check"},
		"method":        {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-method": "PATCH"},
		"signin":        {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-signin": "https://$remote_addr/start"},
		"headers":       {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-A,X-A"},
		"hdr-te":        {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, Transfer-Encoding"},
		"hdr-cl":        {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, content-length"},
		"hdr-host":      {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, Host"},
		"hdr-conn":      {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, Connection"},
		"hdr-upgrade":   {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, Upgrade"},
		"hdr-keepalive": {annotation.NginxPrefix + "auth-url": "http://oauth2-proxy.ns.svc/a", annotation.NginxPrefix + "auth-response-headers": "X-User, Keep-Alive"},
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

// TestExternalAuthHTTPSAndNamespaces: an https auth-url's pool speaks TLS
// with SNI and the checked name the URL's host, against the CA Secret
// named, or unchecked only when the Ingress says so; a Service of another
// namespace is used only when --auth-url-namespaces lists it; an nginx
// variable in auth-url is refused with the reason, in auth-signin kept.
func TestExternalAuthHTTPSAndNamespaces(t *testing.T) {
	const host = "oauth2-proxy.oauth2-proxy.svc.cluster.local"
	ing := func(name string, ann map[string]string) *networkingv1.Ingress {
		return simpleIngress(t, "ns", name, 0, ann, name+".example", "/")
	}
	snap := snapshotOf(
		ing("verified", map[string]string{annotation.NginxPrefix + "auth-url": "https://" + host + "/oauth2/auth", annotation.AuthURLCASecret: "auth-ca",
			annotation.NginxPrefix + "auth-signin": "https://$host/oauth2/start?rd=$escaped_request_uri"}),
		ing("unverified", map[string]string{annotation.NginxPrefix + "auth-url": "https://" + host + ":8443/oauth2/auth", annotation.AuthURLVerify: "false"}),
		ing("plain", map[string]string{annotation.NginxPrefix + "auth-url": "http://" + host + "/oauth2/auth"}),
		ing("no-ca", map[string]string{annotation.NginxPrefix + "auth-url": "https://" + host + "/oauth2/auth"}),
		ing("missing-ca", map[string]string{annotation.NginxPrefix + "auth-url": "https://" + host + "/oauth2/auth", annotation.AuthURLCASecret: "gone"}),
		ing("variable", map[string]string{annotation.NginxPrefix + "auth-url": "https://$host/oauth2/auth"}),
		ing("victim", map[string]string{annotation.NginxPrefix + "auth-url": "http://web.victim.svc/auth"}),
	)
	svc, es := backend("oauth2-proxy", "oauth2-proxy", "p80", 80, 1)
	for _, port := range []int32{443, 8443} {
		name, target := "p"+strconv.Itoa(int(port)), port+1000
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP})
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: &name, Port: &target})
	}
	snap.Services, snap.EndpointSlices = append(snap.Services, svc), append(snap.EndpointSlices, es)
	snap.Secrets = append(snap.Secrets, proxySSLSecret(t, "ns", "auth-ca", true, false))
	ca, _ := tlscert.ParseCA(snap.Secrets[0].Data["ca.crt"])

	opts := DefaultOptions()
	res := Ingresses(snap, opts)
	for _, name := range []string{"verified", "unverified", "plain"} {
		if ps := problemsFor(res, name); len(ps) == 0 || !strings.Contains(ps[0].Message, "--auth-url-namespaces") {
			t.Errorf("%s without --auth-url-namespaces: problems %+v", name, ps)
		}
	}
	opts.AuthURLNamespaces = []string{"oauth2-proxy"}
	res = Ingresses(snap, opts)
	authPool := func(name string) *model.Pool {
		t.Helper()
		for _, lb := range res.LoadBalancers {
			if lb.UUID != res.Accepted[model.IngressRef("ns", name)] {
				continue
			}
			for _, p := range lb.Listeners[0].Policies {
				if p.Options != nil && p.Options.ExternalAuth != nil {
					return lb.Pool(p.Options.ExternalAuth.PoolID)
				}
			}
		}
		t.Fatalf("%s: no auth pool; problems %+v", name, problemsFor(res, name))
		return nil
	}
	want := &model.UpstreamTLS{Verify: true, SNI: true, Name: host, Namespace: "ns", Secret: "auth-ca", CASHA256: ca.SHA256}
	if p := authPool("verified"); p.Namespace != "oauth2-proxy" || p.Port != "443" || p.Protocol != model.BackendHTTPS || !reflect.DeepEqual(p.UpstreamTLS, want) {
		t.Errorf("verified: pool %+v, TLS %+v", p, p.UpstreamTLS)
	}
	if p := authPool("unverified"); p.Port != "8443" || len(p.Members) != 1 || p.Members[0].Port != 9443 || p.Protocol != model.BackendHTTPS ||
		!reflect.DeepEqual(p.UpstreamTLS, &model.UpstreamTLS{SNI: true, Name: host}) {
		t.Errorf("unverified: pool %+v, TLS %+v", p, p.UpstreamTLS)
	}
	if p := authPool("plain"); p.Port != "80" || p.Protocol != "" || p.UpstreamTLS != nil || len(p.Members) != 1 {
		t.Errorf("plain: pool %+v", p)
	}
	for name, msg := range map[string]string{"no-ca": "pier.dev/auth-url-ca-secret", "missing-ca": "ns/gone not found",
		"variable": "a client would choose it", "victim": "only the Ingress's own namespace"} {
		if ps := problemsFor(res, name); len(ps) == 0 || ps[0].Reason != "InvalidAnnotation" || !strings.Contains(ps[0].Message, msg) {
			t.Errorf("%s: problems %+v, want a refusal saying %q", name, ps, msg)
		}
		if _, ok := res.Accepted[model.IngressRef("ns", name)]; ok {
			t.Errorf("%s is served", name)
		}
	}
}
