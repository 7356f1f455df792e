package web

import (
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

type routePage struct {
	Title    string
	Row      routeRow
	UID      string
	Rules    []routeRuleView
	Problems []problemView
	// Errors are the recent 5xx kinds of its rules, newest first.
	Errors []errorView
}

func (p *routePage) etagSource() any { return p }

// routeRuleView is one rule of the spec as the user wrote it, each part
// already a cleaned string.
type routeRuleView struct {
	Index    int
	Name     string
	Matches  []string
	Filters  []string
	Backends []string
}

func (h *Handler) httpRoute(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if h.Gateways == nil {
		h.notFound(w, r)
		return
	}
	gws := h.Gateways.Gateways()
	for _, rt := range h.Gateways.HTTPRoutes() {
		if rt.Route.Namespace == ns && rt.Route.Name == name {
			lbs, err := h.Store.List(r.Context())
			if err != nil {
				h.fail(w, r, err)
				return
			}
			p := buildRoute(rt, gatewaySet(gws), h)
			p.Errors = routeErrors(lbs, model.Source{Kind: model.KindHTTPRoute, Namespace: ns, Name: name}, h.now())
			h.page(w, r, http.StatusOK, "httproute", p)
			return
		}
	}
	h.notFound(w, r)
}

func buildRoute(rt HTTPRouteInfo, ours map[model.ObjectRef]bool, h *Handler) *routePage {
	route := rt.Route
	p := &routePage{Title: Clean(route.Namespace + "/" + route.Name), Row: buildRouteRow(routeInfoOf(rt), ours, h.now()), UID: Clean(string(route.UID))}
	for i, rule := range route.Spec.Rules {
		v := routeRuleView{Index: i}
		if rule.Name != nil {
			v.Name = Clean(string(*rule.Name))
		}
		for _, m := range rule.Matches {
			v.Matches = append(v.Matches, Clean(matchString(m)))
		}
		for _, f := range rule.Filters {
			v.Filters = append(v.Filters, Clean(string(f.Type)))
		}
		for _, b := range rule.BackendRefs {
			v.Backends = append(v.Backends, Clean(backendRefString(b.BackendRef, route.Namespace)))
		}
		p.Rules = append(p.Rules, v)
	}
	for _, pr := range rt.Problems {
		p.Problems = append(p.Problems, buildProblem(pr))
	}
	return p
}

// routeErrors are the recent 5xx kinds of route's rules, from the load
// balancers one of whose policies it made, newest first.
func routeErrors(lbs []*model.LoadBalancer, route model.Source, now time.Time) []errorView {
	var out []errorView
	for _, lb := range lbs {
		if !slices.ContainsFunc(lb.Listeners, func(l model.Listener) bool {
			return slices.ContainsFunc(l.Policies, func(p model.L7Policy) bool {
				return p.Source.Kind == route.Kind && p.Source.Namespace == route.Namespace && p.Source.Name == route.Name
			})
		}) {
			continue
		}
		out = append(out, recentErrors(lb, now, errorsOf(route.Kind, route.Namespace, route.Name))...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Created.After(out[j].Created) })
	return out
}

// matchString is one match as "PathPrefix /api, header X-A=1, query q=1,
// method GET".
func matchString(m gwv1.HTTPRouteMatch) string {
	var parts []string
	if m.Path != nil {
		typ, value := "PathPrefix", "/"
		if m.Path.Type != nil {
			typ = string(*m.Path.Type)
		}
		if m.Path.Value != nil {
			value = *m.Path.Value
		}
		parts = append(parts, typ+" "+value)
	}
	for _, hm := range m.Headers {
		parts = append(parts, "header "+string(hm.Name)+"="+hm.Value)
	}
	for _, q := range m.QueryParams {
		parts = append(parts, "query "+string(q.Name)+"="+q.Value)
	}
	if m.Method != nil {
		parts = append(parts, "method "+string(*m.Method))
	}
	if len(parts) == 0 {
		return "every request"
	}
	return strings.Join(parts, ", ")
}

// backendRefString is "[ns/]name:port (weight w)", the kind named when
// not a Service.
func backendRefString(b gwv1.BackendRef, routeNS string) string {
	out := string(b.Name)
	if b.Namespace != nil && string(*b.Namespace) != routeNS {
		out = string(*b.Namespace) + "/" + out
	}
	if b.Kind != nil && *b.Kind != "Service" {
		out = string(*b.Kind) + "/" + out
	}
	if b.Port != nil {
		out += ":" + strconv.Itoa(int(*b.Port))
	}
	if b.Weight != nil {
		out += " (weight " + strconv.Itoa(int(*b.Weight)) + ")"
	}
	return out
}
