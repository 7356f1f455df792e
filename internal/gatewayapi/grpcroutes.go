package gatewayapi

import (
	"fmt"
	"sort"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// A GRPCRoute is served as the HTTPRoute that says the same: gRPC is
// HTTP/2 whose :path is "/" service "/" method, so a method match is a
// path match, a header match a header match, and its filters are
// HTTPRoute filters of the same names. What no HTTPRoute can say is
// refused with the field, the route then not served. Its pools speak
// h2c to the members (model.BackendGRPC), so they are pools of their own,
// apart from the HTTP pools of the same Services.

var routeKindGRPC = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: model.KindGRPCRoute}

// routeObject is one route of either kind, as the translation attaches
// it: r is the HTTPRoute itself or a GRPCRoute's HTTPRoute form.
type routeObject struct {
	r    *gwv1.HTTPRoute
	kind string // model.KindHTTPRoute or model.KindGRPCRoute
	// refusal is what a GRPCRoute asks that its HTTPRoute form cannot
	// say; nil for an HTTPRoute.
	refusal *routeRefusal
}

// routeObjects are the snapshot's HTTPRoutes and GRPCRoutes, oldest
// first: the order in which routes are counted against the caps and in
// which, on a listener, a route of one kind wins over one of the other.
func routeObjects(snap *source.Snapshot) []routeObject {
	out := make([]routeObject, 0, len(snap.HTTPRoutes)+len(snap.GRPCRoutes))
	for _, r := range snap.HTTPRoutes {
		out = append(out, routeObject{r: r, kind: model.KindHTTPRoute})
	}
	for _, g := range snap.GRPCRoutes {
		r, refusal := grpcAsHTTP(g)
		out = append(out, routeObject{r: r, kind: model.KindGRPCRoute, refusal: refusal})
	}
	sort.SliceStable(out, func(i, j int) bool { return olderObject(out[i].r, out[j].r) })
	return out
}

// grpcAsHTTP is a GRPCRoute's HTTPRoute form, and the first thing in it
// that form cannot say (the route is then refused with it).
func grpcAsHTTP(g *gwv1.GRPCRoute) (*gwv1.HTTPRoute, *routeRefusal) {
	r := &gwv1.HTTPRoute{ObjectMeta: g.ObjectMeta}
	r.Spec.ParentRefs = g.Spec.ParentRefs
	r.Spec.Hostnames = g.Spec.Hostnames
	var first *routeRefusal
	refuse := func(field, format string, args ...any) {
		if first == nil {
			first = &routeRefusal{field, fmt.Sprintf(format, args...)}
		}
	}
	for i, gr := range g.Spec.Rules {
		rule := gwv1.HTTPRouteRule{Name: gr.Name, SessionPersistence: gr.SessionPersistence}
		for j, gm := range gr.Matches {
			m, err := grpcMatch(gm)
			if err != nil {
				refuse(fmt.Sprintf("spec.rules[%d].matches[%d]", i, j), "%v", err)
			}
			rule.Matches = append(rule.Matches, m)
		}
		rule.Filters = grpcFilters(gr.Filters)
		for _, ref := range gr.BackendRefs {
			rule.BackendRefs = append(rule.BackendRefs, gwv1.HTTPBackendRef{BackendRef: ref.BackendRef, Filters: grpcFilters(ref.Filters)})
		}
		r.Spec.Rules = append(r.Spec.Rules, rule)
	}
	return r, first
}

// grpcMatch is a GRPCRouteMatch as an HTTPRouteMatch. An Exact method
// match of a service and a method is the Exact path /service/method; of
// a service alone, the path prefix /service (whole segments: any of its
// methods); no method match, any path. A method without its service and
// RegularExpression matches need a regular expression on the path, which
// the Gateway API translation does not serve: refused.
func grpcMatch(gm gwv1.GRPCRouteMatch) (gwv1.HTTPRouteMatch, error) {
	var m gwv1.HTTPRouteMatch
	for _, h := range gm.Headers {
		t := gwv1.HeaderMatchExact
		if h.Type != nil && *h.Type == gwv1.GRPCHeaderMatchRegularExpression {
			t = gwv1.HeaderMatchRegularExpression
		} else if h.Type != nil && *h.Type != gwv1.GRPCHeaderMatchExact {
			return m, fmt.Errorf("header match type %s is not Exact or RegularExpression", translate.Quote(string(*h.Type)))
		}
		m.Headers = append(m.Headers, gwv1.HTTPHeaderMatch{Type: &t, Name: gwv1.HTTPHeaderName(h.Name), Value: h.Value})
	}
	mm := gm.Method
	if mm == nil {
		m.Path = &gwv1.HTTPPathMatch{Type: ptrTo(gwv1.PathMatchPathPrefix), Value: ptrTo("/")}
		return m, nil
	}
	if mm.Type != nil && *mm.Type != gwv1.GRPCMethodMatchExact {
		return m, fmt.Errorf("method match type %s is not served: only Exact", translate.Quote(string(*mm.Type)))
	}
	service, method := deref(mm.Service), deref(mm.Method)
	switch {
	case service == "" && method == "":
		return m, fmt.Errorf("a method match needs a service or a method")
	case service == "":
		return m, fmt.Errorf("a method match of a method without its service is not served")
	}
	svc, err := encode.GRPCService(service)
	if err != nil {
		return m, fmt.Errorf("method.service: %w", err)
	}
	if method == "" {
		m.Path = &gwv1.HTTPPathMatch{Type: ptrTo(gwv1.PathMatchPathPrefix), Value: ptrTo("/" + svc.String())}
		return m, nil
	}
	meth, err := encode.GRPCMethod(method)
	if err != nil {
		return m, fmt.Errorf("method.method: %w", err)
	}
	m.Path = &gwv1.HTTPPathMatch{Type: ptrTo(gwv1.PathMatchExact), Value: ptrTo(encode.GRPCMethodPath(svc, meth))}
	return m, nil
}

// grpcFilters are GRPCRoute filters as the HTTPRoute filters of the same
// types: the header modifiers are served; RequestMirror and ExtensionRef
// are refused by the HTTPRoute translation as for an HTTPRoute, and an
// unknown type likewise.
func grpcFilters(in []gwv1.GRPCRouteFilter) []gwv1.HTTPRouteFilter {
	var out []gwv1.HTTPRouteFilter
	for _, f := range in {
		out = append(out, gwv1.HTTPRouteFilter{
			Type:                   gwv1.HTTPRouteFilterType(f.Type),
			RequestHeaderModifier:  f.RequestHeaderModifier,
			ResponseHeaderModifier: f.ResponseHeaderModifier,
			RequestMirror:          f.RequestMirror,
			ExtensionRef:           f.ExtensionRef,
		})
	}
	return out
}

// h2cPool is the h2c form of a pool: a GRPCRoute's rule's, or an
// HTTPRoute's whose Service ports say appProtocol kubernetes.io/h2c. Its
// ID and name say grpc, gRPC being its first use: they name the pool in
// HAProxy's backends and metrics, which should not change under users
// who have GRPCRoutes.
func h2cPool(p *model.Pool) *model.Pool {
	if p == nil || p.Protocol == model.BackendGRPC || p.Protocol == model.BackendGRPCS {
		return p
	}
	g := *p
	g.Protocol = model.BackendGRPC
	if p.Protocol == model.BackendHTTPS { // a BackendTLSPolicy's: HTTP/2 over TLS
		g.Protocol = model.BackendGRPCS
	}
	g.ID = model.ID("grpc", p.ID)
	g.Name = p.Name + "_grpc"
	return &g
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reasonRouteKindConflict refuses, on a listener, a route whose hostnames
// meet those of an older route of the other kind: the spec accepts
// exactly one of an HTTPRoute and a GRPCRoute there, the oldest (then the
// first by namespace/name, the order routes are attached in).
const reasonRouteKindConflict = "ConflictingRouteKind"

// servesOtherKind reports whether a route of a kind other than kind
// already serves one of hosts on the listener.
func (l *gwListener) servesOtherKind(kind string, hosts []string) bool {
	for k, served := range l.routeHosts {
		if k == kind {
			continue
		}
		for _, a := range hosts {
			for _, b := range served {
				if a == "" || b == "" || len(intersectHosts(a, []string{b})) > 0 {
					return true
				}
			}
		}
	}
	return false
}

// served records that a route of kind serves hosts on the listener.
func (l *gwListener) served(kind string, hosts []string) {
	if l.routeHosts == nil {
		l.routeHosts = map[string][]string{}
	}
	l.routeHosts[kind] = append(l.routeHosts[kind], hosts...)
}
