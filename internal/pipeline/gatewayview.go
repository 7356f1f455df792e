package pipeline

import (
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/translate"
)

// GatewayState is one Gateway of our classes as pier knows it: a copy
// whose status is what pier computes (translation's conditions and
// listeners, completed by the status pass: Programmed and addresses once
// HAProxy serves it), the load balancer it became ("" when refused) and
// the problems of the last rebuild.
type GatewayState struct {
	Gateway      *gwv1.Gateway
	LoadBalancer string
	Problems     []model.Problem
}

// HTTPRouteState is one HTTPRoute that names a Gateway of ours: a copy
// whose status.parents holds pier's entries as computed (other
// controllers' entries as the object has them), and its problems.
type HTTPRouteState struct {
	Route    *gwv1.HTTPRoute
	Problems []model.Problem
}

// gatewayView is what the last status pass computed for the Gateway API
// objects, kept for readers (the API, the web view) in every mode: pier
// run writes no object, and a controller's cache lags its own writes.
// Transition times are kept from one pass to the next while a
// condition's status holds (status.MergeGateway), so a page polled twice
// shows the same status.
type gatewayView struct {
	gateways map[model.ObjectRef]gwv1.GatewayStatus
	routes   map[model.ObjectRef][]gwv1.RouteParentStatus
	lbs      map[model.ObjectRef]string // Gateway → load balancer UUID
}

// gatewayViewKey is what a view depends on: the snapshot (other
// controllers' route entries), the rebuild's result and the addresses the
// Gateways publish. Store passes come up to 40 times a second while
// agents report; most change none of them.
type gatewayViewKey struct {
	snap   *source.Snapshot
	result *translate.Result
	addrs  string
}

func viewKeyOf(snap *source.Snapshot, res *translate.Result, next status.Published) gatewayViewKey {
	k := gatewayViewKey{snap: snap, result: res}
	if res.Gateway == nil {
		return k
	}
	refs := make([]model.ObjectRef, 0, len(res.Gateway.Gateways))
	for ref := range res.Gateway.Gateways {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Namespace+"/"+refs[i].Name < refs[j].Namespace+"/"+refs[j].Name })
	var b strings.Builder
	for _, ref := range refs {
		b.WriteString(ref.Namespace + "/" + ref.Name + "=")
		for _, a := range next[ref] {
			b.WriteString(a.IP + a.Hostname + ",")
		}
		b.WriteByte(';')
	}
	k.addrs = b.String()
	return k
}

// updateGatewayView merges a status pass's result (st, completed from
// res.Gateway and next) into the view, unless nothing it depends on
// changed. Called by Run's goroutine only; readers take p.mu.
func (p *Pipeline) updateGatewayView(snap *source.Snapshot, res *translate.Result, st *translate.GatewayStatus, published status.Published) {
	key := viewKeyOf(snap, res, published)
	if key == p.gwViewOf {
		return
	}
	p.gwViewOf = key
	accepted := res.Accepted
	now := metav1.NewTime(time.Now().UTC().Truncate(time.Second))
	p.mu.Lock()
	prev := p.gwView
	p.mu.Unlock()
	next := &gatewayView{gateways: map[model.ObjectRef]gwv1.GatewayStatus{},
		routes: map[model.ObjectRef][]gwv1.RouteParentStatus{}, lbs: map[model.ObjectRef]string{}}
	if st != nil {
		have := snapshotStatuses(snap)
		for ref, want := range st.Gateways {
			base, ok := prev.gateway(ref)
			if !ok {
				base = have.gateways[ref]
			}
			next.gateways[ref] = status.MergeGateway(base, want, now)
			next.lbs[ref] = accepted[ref]
		}
		ctrl := gwv1.GatewayController(p.Translate.GatewayControllerName)
		for ref, want := range st.Routes {
			next.routes[ref] = status.MergeRouteParents(routeBase(have.routes[ref], prev, ref, ctrl), want, ctrl, now)
		}
	}
	p.mu.Lock()
	p.gwView = next
	p.mu.Unlock()
}

func (v *gatewayView) gateway(ref model.ObjectRef) (gwv1.GatewayStatus, bool) {
	if v == nil {
		return gwv1.GatewayStatus{}, false
	}
	st, ok := v.gateways[ref]
	return st, ok
}

func (v *gatewayView) route(ref model.ObjectRef) ([]gwv1.RouteParentStatus, bool) {
	if v == nil {
		return nil, false
	}
	st, ok := v.routes[ref]
	return st, ok
}

// routeBase is what a route's parents are merged into: the object's
// entries of other controllers, where they are, and pier's entries of the
// previous pass (or the object's, on the first).
func routeBase(have []gwv1.RouteParentStatus, prev *gatewayView, ref model.ObjectRef, ctrl gwv1.GatewayController) []gwv1.RouteParentStatus {
	ours, ok := prev.route(ref)
	if !ok {
		return have
	}
	var out []gwv1.RouteParentStatus
	for _, h := range have {
		if h.ControllerName != ctrl {
			out = append(out, h)
		}
	}
	for _, o := range ours {
		if o.ControllerName == ctrl {
			out = append(out, o)
		}
	}
	return out
}

// snapshotStatuses is the status the objects carry (what the leader
// wrote, in Kubernetes mode): the first pass keeps its transition times.
func snapshotStatuses(snap *source.Snapshot) *gatewayView {
	v := &gatewayView{gateways: map[model.ObjectRef]gwv1.GatewayStatus{}, routes: map[model.ObjectRef][]gwv1.RouteParentStatus{}}
	if snap == nil {
		return v
	}
	for _, gw := range snap.Gateways {
		v.gateways[model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}] = gw.Status
	}
	for _, r := range snap.HTTPRoutes {
		v.routes[model.ObjectRef{Kind: model.KindHTTPRoute, Namespace: r.Namespace, Name: r.Name}] = r.Status.Parents
	}
	return v
}

// Gateways lists the Gateways of our classes in the last snapshot, sorted
// by namespace and name, with the status pier computed; nil before the
// first snapshot (not known here).
func (p *Pipeline) Gateways() []GatewayState {
	p.init()
	p.mu.Lock()
	snap, view := p.snap, p.gwView
	p.mu.Unlock()
	if snap == nil {
		return nil
	}
	out := []GatewayState{}
	for _, gw := range snap.Gateways {
		ref := model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}
		st, ok := view.gateway(ref)
		if !ok {
			continue // not of our classes
		}
		c := gw.DeepCopy()
		c.APIVersion, c.Kind = gwv1.GroupVersion.String(), "Gateway"
		c.Status = *st.DeepCopy()
		out = append(out, GatewayState{Gateway: c, LoadBalancer: view.lbs[ref], Problems: p.Book.Of(ref)})
	}
	sort.Slice(out, func(i, j int) bool { return lessMeta(&out[i].Gateway.ObjectMeta, &out[j].Gateway.ObjectMeta) })
	return out
}

// HTTPRoutes lists the HTTPRoutes of the last snapshot that name a
// Gateway of ours, sorted, with pier's parent entries as computed; nil
// before the first snapshot.
func (p *Pipeline) HTTPRoutes() []HTTPRouteState {
	p.init()
	p.mu.Lock()
	snap, view := p.snap, p.gwView
	p.mu.Unlock()
	if snap == nil {
		return nil
	}
	out := []HTTPRouteState{}
	for _, r := range snap.HTTPRoutes {
		ref := model.ObjectRef{Kind: model.KindHTTPRoute, Namespace: r.Namespace, Name: r.Name}
		parents, ok := view.route(ref)
		if !ok {
			continue // names no Gateway of ours
		}
		c := r.DeepCopy()
		c.APIVersion, c.Kind = gwv1.GroupVersion.String(), "HTTPRoute"
		c.Status.Parents = nil
		for _, ps := range parents {
			c.Status.Parents = append(c.Status.Parents, *ps.DeepCopy())
		}
		out = append(out, HTTPRouteState{Route: c, Problems: p.Book.Of(ref)})
	}
	sort.Slice(out, func(i, j int) bool { return lessMeta(&out[i].Route.ObjectMeta, &out[j].Route.ObjectMeta) })
	return out
}

// RouteState is one route of any kind pier serves (HTTPRoute, GRPCRoute,
// TLSRoute, TCPRoute, UDPRoute) that names a Gateway of ours: its kind,
// its metadata, the hostnames of its spec (HTTPRoute, GRPCRoute and
// TLSRoute have them; none means every name its listeners take), pier's
// parent entries as computed and its problems.
type RouteState struct {
	Kind      string
	Meta      metav1.ObjectMeta
	Hostnames []gwv1.Hostname
	Parents   []gwv1.RouteParentStatus
	Problems  []model.Problem
}

// Routes lists every route of the last snapshot that names a Gateway of
// ours, whatever its kind, sorted by kind, namespace and name; nil before
// the first snapshot.
func (p *Pipeline) Routes() []RouteState {
	p.init()
	p.mu.Lock()
	snap, view := p.snap, p.gwView
	p.mu.Unlock()
	if snap == nil {
		return nil
	}
	out := []RouteState{}
	add := func(kind string, meta *metav1.ObjectMeta, hostnames []gwv1.Hostname) {
		ref := model.ObjectRef{Kind: kind, Namespace: meta.Namespace, Name: meta.Name}
		parents, ok := view.route(ref)
		if !ok {
			return // names no Gateway of ours
		}
		st := RouteState{Kind: kind, Meta: *meta.DeepCopy(), Hostnames: slices.Clone(hostnames), Problems: p.Book.Of(ref)}
		st.Meta.ManagedFields = nil
		for _, ps := range parents {
			st.Parents = append(st.Parents, *ps.DeepCopy())
		}
		out = append(out, st)
	}
	for _, r := range snap.HTTPRoutes {
		add(model.KindHTTPRoute, &r.ObjectMeta, r.Spec.Hostnames)
	}
	for _, r := range snap.GRPCRoutes {
		add(model.KindGRPCRoute, &r.ObjectMeta, r.Spec.Hostnames)
	}
	for _, r := range snap.TLSRoutes {
		add(model.KindTLSRoute, &r.ObjectMeta, r.Spec.Hostnames)
	}
	for _, r := range snap.TCPRoutes {
		add(model.KindTCPRoute, &r.ObjectMeta, nil)
	}
	for _, r := range snap.UDPRoutes {
		add(model.KindUDPRoute, &r.ObjectMeta, nil)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return lessMeta(&out[i].Meta, &out[j].Meta)
	})
	return out
}

// Gateway returns one Gateway of ours as Gateways lists it.
func (p *Pipeline) Gateway(namespace, name string) (GatewayState, bool) {
	for _, g := range p.Gateways() {
		if g.Gateway.Namespace == namespace && g.Gateway.Name == name {
			return g, true
		}
	}
	return GatewayState{}, false
}

// HTTPRoute returns one HTTPRoute as HTTPRoutes lists it.
func (p *Pipeline) HTTPRoute(namespace, name string) (HTTPRouteState, bool) {
	for _, r := range p.HTTPRoutes() {
		if r.Route.Namespace == namespace && r.Route.Name == name {
			return r, true
		}
	}
	return HTTPRouteState{}, false
}

func lessMeta(a, b *metav1.ObjectMeta) bool {
	return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
}
