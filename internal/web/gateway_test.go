package web

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

type fakeGateways struct {
	gws    []GatewayInfo
	routes []HTTPRouteInfo
	others []RouteInfo // routes of the other kinds
}

func (f fakeGateways) Gateways() []GatewayInfo     { return f.gws }
func (f fakeGateways) HTTPRoutes() []HTTPRouteInfo { return f.routes }

// Routes are every kind, sorted by kind as the pipeline sorts them.
func (f fakeGateways) Routes() []RouteInfo {
	out := slices.Clone(f.others)
	for _, rt := range f.routes {
		out = append(out, routeInfoOf(rt))
	}
	slices.SortStableFunc(out, func(a, b RouteInfo) int { return strings.Compare(a.Kind, b.Kind) })
	return out
}

func cond(typ string, ok bool, reason, msg string) metav1.Condition {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: 1}
}

// gatewayFixture is Gateway ns/name (load balancer uuid) with listener
// listener, one HTTPRoute accepted and one refused with reason and
// message, and a TLSRoute (hostname msg) and a TCPRoute accepted.
func gatewayFixture(ns, name, listener, uuid, msg string) fakeGateways {
	ip := gwv1.IPAddressType
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(now.Add(-time2h))},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier", Listeners: []gwv1.Listener{{Name: gwv1.SectionName(listener), Port: 80, Protocol: gwv1.HTTPProtocolType}}},
		Status: gwv1.GatewayStatus{
			Addresses:  []gwv1.GatewayStatusAddress{{Type: &ip, Value: "127.10.0.1"}},
			Conditions: []metav1.Condition{cond("Accepted", true, "Accepted", ""), cond("Programmed", true, "Programmed", "")},
			Listeners: []gwv1.ListenerStatus{{Name: gwv1.SectionName(listener), AttachedRoutes: 2,
				SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
				Conditions:     []metav1.Condition{cond("Accepted", true, "Accepted", ""), cond("Programmed", true, "Programmed", "")}}},
		}}
	route := func(rname string, accepted bool, reason, message string) HTTPRouteInfo {
		r := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rname, CreationTimestamp: metav1.NewTime(now.Add(-time2h))}}
		r.Spec.Hostnames = []gwv1.Hostname{"shop.example"}
		path := "/" + rname
		r.Spec.Rules = []gwv1.HTTPRouteRule{{Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{Value: &path},
			Headers: []gwv1.HTTPHeaderMatch{{Name: "X-Env", Value: msg}}}},
			BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
				Name: gwv1.ObjectName(rname), Port: ptrTo(gwv1.PortNumber(80))}}}}}}
		r.Status.Parents = []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(name)},
			ControllerName: "pier.dev/gateway-controller",
			Conditions:     []metav1.Condition{cond("Accepted", accepted, reason, message), cond("ResolvedRefs", true, "ResolvedRefs", "")}}}
		info := HTTPRouteInfo{Route: r}
		if !accepted {
			info.Problems = []model.Problem{{Kind: model.KindHTTPRoute, Namespace: ns, Name: rname, Severity: model.SeverityError,
				Reason: reason, Field: "spec.rules[0].matches[0].headers[0].value", Message: message}}
		}
		return info
	}
	other := func(kind, rname string, hostnames ...gwv1.Hostname) RouteInfo {
		return RouteInfo{Kind: kind, Meta: metav1.ObjectMeta{Namespace: ns, Name: rname, CreationTimestamp: metav1.NewTime(now.Add(-time2h))},
			Hostnames: hostnames, Parents: []gwv1.RouteParentStatus{{ParentRef: gwv1.ParentReference{Name: gwv1.ObjectName(name)},
				ControllerName: "pier.dev/gateway-controller",
				Conditions:     []metav1.Condition{cond("Accepted", true, "Accepted", ""), cond("ResolvedRefs", true, "ResolvedRefs", "")}}}}
	}
	return fakeGateways{gws: []GatewayInfo{{Gateway: gw, LoadBalancer: uuid}},
		routes: []HTTPRouteInfo{route("web", true, "Accepted", ""), route("bad", false, "UnsupportedValue", msg)},
		others: []RouteInfo{other(model.KindTLSRoute, "apps", gwv1.Hostname(msg)), other(model.KindTCPRoute, "db")}}
}

const time2h = 2 * time.Hour

func ptrTo[T any](v T) *T { return &v }

// gatewayLB is the load balancer a Gateway became.
func gatewayLB(uuid, ns, name string) *model.LoadBalancer {
	l := lb(uuid, ns, name, 1)
	l.Sources = []model.Source{{Kind: model.KindGateway, Namespace: ns, Name: name}}
	l.Listeners[0].Policies[0].Source = model.Source{Kind: model.KindHTTPRoute, Namespace: ns, Name: "web"}
	return l
}

// A Gateway shows like an Ingress: its load balancer row names it and
// links to its page, which lists listeners with attachedRoutes and
// conditions, the routes attached and those refused with their reasons.
func TestGatewayPages(t *testing.T) {
	f := newFixture(t, fakeIngresses{}, gatewayLB("u1", "demo", "gw"))
	f.h.Gateways = gatewayFixture("demo", "gw", "http", "u1", "bad$value")
	_, _, body := get(t, f.srv.URL+"/")
	mustContain(t, "overview", body, `<a href="/ui/gateway/demo/gw">demo/gw</a> <span class="muted">(Gateway)</span>`,
		`<td class="num problems"><span class="bad">1</span></td>`, `id="gw-problem-count">1 Gateway API object with problems</a>`)
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	mustContain(t, "detail", body, `href="/ui/gateway/demo/gw"`, `href="/ui/httproute/demo/web"`,
		`<a href="/ui/httproute/demo/bad">demo/bad</a> <span class="muted">(HTTPRoute)</span>`)
	// An Ingress of the same namespace and name as the Gateway lends it
	// no problem: sources are told apart by kind.
	f.h.Ingresses = fakeIngresses{{Ingress: ingress("demo", "gw", nil), Problems: []model.Problem{{Kind: model.KindIngress,
		Namespace: "demo", Name: "gw", Severity: model.SeverityError, Reason: "InvalidHost", Message: "ingress only"}}}}
	_, _, body = get(t, f.srv.URL+"/ui/lb/u1")
	if strings.Contains(body, "ingress only") {
		t.Error("the Gateway's load balancer shows an Ingress's problem")
	}
	f.h.Ingresses = fakeIngresses{}
	_, _, body = get(t, f.srv.URL+"/ui/gateways")
	mustContain(t, "list", body, `href="/ui/gateway/demo/gw"`, "127.10.0.1", `href="/ui/lb/u1"`, "Programmed=True/Programmed",
		`href="/ui/httproute/demo/bad"`, "Accepted=False/UnsupportedValue", `<tr class="refused">`)
	_, _, body = get(t, f.srv.URL+"/ui/gateway/demo/gw")
	mustContain(t, "gateway", body, `<td class="num attached">2</td>`, "HTTPRoute", `<a href="/ui/lb/u1">demo/gw</a>`,
		"Routes refused", "Accepted=False/UnsupportedValue", "bad$value", "spec.rules[0].matches[0].headers[0].value")
	attached, refused, _ := strings.Cut(body, "Routes refused")
	if !strings.Contains(attached, `href="/ui/httproute/demo/web"`) || strings.Contains(refused, `href="/ui/httproute/demo/web"`) {
		t.Error("the accepted route is not under Routes attached only")
	}
	if !strings.Contains(refused, `href="/ui/httproute/demo/bad"`) {
		t.Error("the refused route is not under Routes refused")
	}
	_, _, body = get(t, f.srv.URL+"/ui/httproute/demo/web")
	mustContain(t, "route", body, "PathPrefix /web, header X-Env=bad$value", "web:80", `href="/ui/gateway/demo/gw"`, "pier.dev/gateway-controller")
	for _, p := range []string{"/ui/gateway/demo/none", "/ui/httproute/demo/none"} {
		if code, _, _ := get(t, f.srv.URL+p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	f.h.Gateways = nil
	_, _, body = get(t, f.srv.URL+"/ui/gateways")
	mustContain(t, "no source", body, "not available here")
}

// The lists show routes of every kind: each row names its kind; only an
// HTTPRoute links to a page of its own (its rules); a TCPRoute has no
// hostnames, it takes its listener's port.
func TestGatewayPagesListEveryRouteKind(t *testing.T) {
	f := newFixture(t, fakeIngresses{}, gatewayLB("u1", "demo", "gw"))
	f.h.Gateways = gatewayFixture("demo", "gw", "http", "u1", "apps.example")
	for _, page := range []string{"/ui/gateways", "/ui/gateway/demo/gw"} {
		_, _, body := get(t, f.srv.URL+page)
		name := "demo/db" // the Gateway's page names routes with their namespace
		if page == "/ui/gateways" {
			name = "db" // the list has a column for it
		}
		mustContain(t, page, body, `<td class="route-kind">TCPRoute</td>`, `<span class="route-name">`+name+`</span>`,
			`<td class="route-kind">TLSRoute</td>`, "<code>apps.example</code>", "by port", "/ui/httproute/demo/web")
		for _, kind := range []string{"tcproute", "tlsroute"} {
			if strings.Contains(body, "/ui/"+kind+"/") {
				t.Errorf("%s links to a %s page, which does not exist", page, kind)
			}
		}
	}
	_, _, body := get(t, f.srv.URL+"/ui/gateway/demo/gw")
	attached, _, _ := strings.Cut(body, "Routes refused")
	if !strings.Contains(attached, "demo/db") || !strings.Contains(attached, "demo/apps") {
		t.Error("the accepted TCPRoute and TLSRoute are not under Routes attached")
	}
	if code, _, _ := get(t, f.srv.URL+"/ui/httproute/demo/db"); code != 404 {
		t.Errorf("a TCPRoute's name as an HTTPRoute page: %d, want 404", code)
	}
}

// Every user string of a Gateway or route page is text, never markup.
func TestGatewayHostileStrings(t *testing.T) {
	f := newFixture(t, fakeIngresses{}, gatewayLB("u9", hostileImg, hostileScript))
	f.h.Gateways = gatewayFixture(hostileImg, hostileScript, hostileBidi, "u9", hostileScript)
	for _, p := range []string{"/", "/ui/gateways", "/ui/lb/u9", "/ui/gateway/" + pathEscape(hostileImg) + "/" + pathEscape(hostileScript),
		"/ui/httproute/" + pathEscape(hostileImg) + "/bad", "/ui/gateways?namespace=" + pathEscape(hostileImg)} {
		code, _, body := get(t, f.srv.URL+p)
		if code != 200 {
			t.Errorf("%s: status %d", p, code)
		}
		for _, bad := range []string{"<script>alert", "<img", "onerror=alert(2)>", "\u202E"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: page contains %q unescaped", p, bad)
			}
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s: the hostile string is not shown as text", p)
		}
	}
	_, _, body := get(t, f.srv.URL+"/ui/gateway/"+pathEscape(hostileImg)+"/"+pathEscape(hostileScript))
	mustContain(t, "gateway", body, "admin‹U&#43;202E›gnp.exe", `href="/ui/httproute/%22%3E%3Cimg%20src=x%20onerror=alert%282%29%3E/bad"`)
}
