package web

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
)

// GatewayInfo, HTTPRouteInfo and RouteInfo are a Gateway, an HTTPRoute
// and a route of any kind as the web view shows them: copies with the
// status pier computes, and problems.
type (
	GatewayInfo   = pipeline.GatewayState
	HTTPRouteInfo = pipeline.HTTPRouteState
	RouteInfo     = pipeline.RouteState
)

// Gateways lists the Gateways of pier's classes and the routes that name
// them: HTTPRoutes whole (their page shows the rules), and the routes of
// every kind, HTTPRoutes included, for the lists. Each returns nil when
// not known here (before the first snapshot, or a standby controller
// replica).
type Gateways interface {
	Gateways() []GatewayInfo
	HTTPRoutes() []HTTPRouteInfo
	Routes() []RouteInfo
}

type conditionView struct {
	Type, Status, Reason, Message string
	Generation                    int64
	// Good says whether the condition is what a healthy object shows:
	// True, except for the abnormal-true types (Conflicted).
	Good bool
}

type gatewayRow struct {
	Href, Namespace, Name, Class string
	Addresses                    []string
	Programmed                   conditionView
	LB                           lbLink // empty when the Gateway became none
	Listeners                    int
	Attached                     int32 // attachedRoutes over its listeners
	Problems, Errors             int
	Created                      time.Time
	Age                          string `json:"-"`
}

// routeParentView is one entry of a route's status.parents.
type routeParentView struct {
	ref          model.ObjectRef // the Gateway, as the status names it
	Gateway      lbLink          // Href empty when the Gateway is not one of ours
	Section      string          // sectionName and port, "" for the whole Gateway
	Controller   string
	Accepted     conditionView
	ResolvedRefs conditionView
}

type routeRow struct {
	// Href is the route's page, which only HTTPRoutes have (their rules);
	// the other kinds' rows carry all the web view shows of them.
	Href, Kind, Namespace, Name string
	// Addressed: the kind has hostnames (all but TCPRoute and UDPRoute).
	Addressed        bool
	Hostnames        []string
	Parents          []routeParentView
	Refused          bool // not accepted by some parent of ours
	Problems, Errors int
	Created          time.Time
	Age              string `json:"-"`
}

type gatewaysPage struct {
	Title      string
	Known      bool
	Namespace  string
	Namespaces []option
	Gateways   []gatewayRow
	Routes     []routeRow
}

func (p *gatewaysPage) etagSource() any { return p }

type gwListenerView struct {
	Name, Protocol, Hostname string
	Port                     int
	AttachedRoutes           int32
	Kinds                    []string
	Conditions               []conditionView
}

// routeAttachment is a route's entry for one Gateway, on that Gateway's page.
type routeAttachment struct {
	Kind      string
	Route     lbLink
	Addressed bool
	Hostnames []string
	Parent    routeParentView
}

type gatewayPage struct {
	Title      string
	Row        gatewayRow
	UID        string
	Conditions []conditionView
	Listeners  []gwListenerView
	Attached   []routeAttachment
	Refused    []routeAttachment
	Problems   []problemView
}

func (p *gatewayPage) etagSource() any { return p }

func gatewayHref(namespace, name string) string {
	return "/ui/gateway/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

func routeHref(namespace, name string) string {
	return "/ui/httproute/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

func (h *Handler) gatewayStates() ([]GatewayInfo, []RouteInfo) {
	if h.Gateways == nil {
		return nil, nil
	}
	return h.Gateways.Gateways(), h.Gateways.Routes()
}

func (h *Handler) gatewayList(w http.ResponseWriter, r *http.Request) {
	lbs, err := h.Store.List(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	gws, routes := h.gatewayStates()
	ns := r.URL.Query().Get("namespace")
	p := &gatewaysPage{Title: "Gateways", Known: gws != nil, Namespace: Clean(ns)}
	byUUID := lbNames(lbs)
	ours := gatewaySet(gws)
	namespaces := map[string]bool{}
	now := h.now()
	for _, g := range gws {
		namespaces[g.Gateway.Namespace] = true
		if ns == "" || g.Gateway.Namespace == ns {
			p.Gateways = append(p.Gateways, buildGatewayRow(g, byUUID, now))
		}
	}
	for _, rt := range routes {
		namespaces[rt.Meta.Namespace] = true
		if ns == "" || rt.Meta.Namespace == ns {
			p.Routes = append(p.Routes, buildRouteRow(rt, ours, now))
		}
	}
	p.Namespaces = options(namespaces, ns)
	h.page(w, r, http.StatusOK, "gateways", p)
}

func lbNames(lbs []*model.LoadBalancer) map[string]string {
	out := make(map[string]string, len(lbs))
	for _, lb := range lbs {
		out[lb.UUID] = lb.Name
	}
	return out
}

func gatewaySet(gws []GatewayInfo) map[model.ObjectRef]bool {
	out := make(map[model.ObjectRef]bool, len(gws))
	for _, g := range gws {
		out[gatewayRef(g.Gateway.Namespace, g.Gateway.Name)] = true
	}
	return out
}

func buildGatewayRow(g GatewayInfo, lbs map[string]string, now time.Time) gatewayRow {
	gw := g.Gateway
	row := gatewayRow{Href: gatewayHref(gw.Namespace, gw.Name), Namespace: Clean(gw.Namespace), Name: Clean(gw.Name),
		Class: Clean(string(gw.Spec.GatewayClassName)), Listeners: len(gw.Spec.Listeners), Problems: len(g.Problems),
		Programmed: findCondition(gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed)),
		Created:    gw.CreationTimestamp.Time, Age: Age(now.Sub(gw.CreationTimestamp.Time))}
	for _, a := range gw.Status.Addresses {
		row.Addresses = append(row.Addresses, Clean(a.Value))
	}
	if name, ok := lbs[g.LoadBalancer]; ok {
		row.LB = lbLink{Href: lbHref(g.LoadBalancer), Name: Clean(name)}
	}
	for _, l := range gw.Status.Listeners {
		row.Attached += l.AttachedRoutes
	}
	row.Errors = countErrors(g.Problems)
	return row
}

func countErrors(ps []model.Problem) int {
	n := 0
	for _, p := range ps {
		if p.Severity == model.SeverityError {
			n++
		}
	}
	return n
}

// routeInfoOf is an HTTPRoute as the lists show every kind.
func routeInfoOf(rt HTTPRouteInfo) RouteInfo {
	return RouteInfo{Kind: model.KindHTTPRoute, Meta: rt.Route.ObjectMeta, Hostnames: rt.Route.Spec.Hostnames,
		Parents: rt.Route.Status.Parents, Problems: rt.Problems}
}

func buildRouteRow(rt RouteInfo, ours map[model.ObjectRef]bool, now time.Time) routeRow {
	m := rt.Meta
	row := routeRow{Kind: Clean(rt.Kind), Addressed: rt.Kind != model.KindTCPRoute && rt.Kind != model.KindUDPRoute, Namespace: Clean(m.Namespace), Name: Clean(m.Name),
		Problems: len(rt.Problems), Errors: countErrors(rt.Problems),
		Created: m.CreationTimestamp.Time, Age: Age(now.Sub(m.CreationTimestamp.Time))}
	if rt.Kind == model.KindHTTPRoute {
		row.Href = routeHref(m.Namespace, m.Name)
	}
	for _, host := range rt.Hostnames {
		row.Hostnames = append(row.Hostnames, Clean(string(host)))
	}
	for _, ps := range rt.Parents {
		pv := buildParent(ps, m.Namespace, ours)
		if pv.Gateway.Href != "" && pv.Accepted.Status != string(metav1.ConditionTrue) {
			row.Refused = true
		}
		row.Parents = append(row.Parents, pv)
	}
	return row
}

func buildParent(ps gwv1.RouteParentStatus, routeNS string, ours map[model.ObjectRef]bool) routeParentView {
	ns := routeNS
	if ps.ParentRef.Namespace != nil {
		ns = string(*ps.ParentRef.Namespace)
	}
	ref := gatewayRef(ns, string(ps.ParentRef.Name))
	pv := routeParentView{ref: ref, Gateway: lbLink{Name: Clean(ns + "/" + string(ps.ParentRef.Name))}, Controller: Clean(string(ps.ControllerName)),
		Accepted:     findCondition(ps.Conditions, string(gwv1.RouteConditionAccepted)),
		ResolvedRefs: findCondition(ps.Conditions, string(gwv1.RouteConditionResolvedRefs))}
	if ours[ref] {
		pv.Gateway.Href = gatewayHref(ns, string(ps.ParentRef.Name))
	}
	if ps.ParentRef.SectionName != nil {
		pv.Section = Clean(string(*ps.ParentRef.SectionName))
	}
	if ps.ParentRef.Port != nil {
		pv.Section += ":" + strconv.Itoa(int(*ps.ParentRef.Port))
	}
	return pv
}

func findCondition(cs []metav1.Condition, typ string) conditionView {
	for _, c := range cs {
		if c.Type == typ {
			good := c.Status == metav1.ConditionTrue
			if c.Type == string(gwv1.ListenerConditionConflicted) {
				good = c.Status == metav1.ConditionFalse
			}
			return conditionView{Type: Clean(c.Type), Status: Clean(string(c.Status)), Reason: Clean(c.Reason),
				Message: Clean(c.Message), Generation: c.ObservedGeneration, Good: good}
		}
	}
	return conditionView{Type: Clean(typ), Status: "Unknown"}
}

func conditionViews(cs []metav1.Condition) []conditionView {
	out := make([]conditionView, 0, len(cs))
	for _, c := range cs {
		out = append(out, findCondition([]metav1.Condition{c}, c.Type))
	}
	return out
}

func (h *Handler) gateway(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	gws, routes := h.gatewayStates()
	for _, g := range gws {
		if g.Gateway.Namespace != ns || g.Gateway.Name != name {
			continue
		}
		lbs, err := h.Store.List(r.Context())
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.page(w, r, http.StatusOK, "gateway", buildGateway(g, gws, routes, lbNames(lbs), h.now()))
		return
	}
	h.notFound(w, r)
}

func buildGateway(g GatewayInfo, gws []GatewayInfo, routes []RouteInfo, lbs map[string]string, now time.Time) *gatewayPage {
	gw := g.Gateway
	p := &gatewayPage{Title: Clean(gw.Namespace + "/" + gw.Name), Row: buildGatewayRow(g, lbs, now), UID: Clean(string(gw.UID)),
		Conditions: conditionViews(gw.Status.Conditions)}
	p.Listeners = gatewayListeners(gw)
	for _, pr := range g.Problems {
		p.Problems = append(p.Problems, buildProblem(pr))
	}
	ours, ref := gatewaySet(gws), gatewayRef(gw.Namespace, gw.Name)
	for _, rt := range routes {
		row := buildRouteRow(rt, ours, now)
		mine := false
		for _, pv := range row.Parents {
			if pv.ref != ref {
				continue
			}
			mine = true
			a := routeAttachment{Kind: row.Kind, Route: lbLink{Href: row.Href, Name: row.Namespace + "/" + row.Name}, Addressed: row.Addressed, Hostnames: row.Hostnames, Parent: pv}
			if pv.Accepted.Status == string(metav1.ConditionTrue) {
				p.Attached = append(p.Attached, a)
			} else {
				p.Refused = append(p.Refused, a)
			}
		}
		if mine {
			for _, pr := range rt.Problems {
				p.Problems = append(p.Problems, buildProblem(pr))
			}
		}
	}
	return p
}

// gatewayListeners are the spec's listeners with the status pier
// computed for each (by name).
func gatewayListeners(gw *gwv1.Gateway) []gwListenerView {
	status := map[gwv1.SectionName]gwv1.ListenerStatus{}
	for _, l := range gw.Status.Listeners {
		status[l.Name] = l
	}
	out := make([]gwListenerView, 0, len(gw.Spec.Listeners))
	for _, l := range gw.Spec.Listeners {
		v := gwListenerView{Name: Clean(string(l.Name)), Protocol: Clean(string(l.Protocol)), Port: int(l.Port), Hostname: "*"}
		if l.Hostname != nil {
			v.Hostname = Clean(string(*l.Hostname))
		}
		st := status[l.Name]
		v.AttachedRoutes, v.Conditions = st.AttachedRoutes, conditionViews(st.Conditions)
		for _, k := range st.SupportedKinds {
			v.Kinds = append(v.Kinds, Clean(string(k.Kind)))
		}
		out = append(out, v)
	}
	return out
}
