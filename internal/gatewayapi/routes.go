package gatewayapi

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// parsedRoute is an HTTPRoute validated once, attached to any number of
// our Gateways.
type parsedRoute struct {
	r       *gwv1.HTTPRoute
	kind    string // model.KindHTTPRoute or model.KindGRPCRoute
	hosts   []string
	rules   []gwRule
	refusal *routeRefusal
	// pools and what failed to resolve, per rule; computed on the first
	// attachment (backends are in the route's namespace, whatever the
	// Gateway).
	backends []backendResult
	// counted are the listeners whose attachedRoutes already count this
	// route: two parentRefs selecting one listener attach one route.
	counted map[*gwListener]bool
}

// attachRoute attaches one HTTPRoute to the Gateways of ours that its
// parentRefs name, and records one parent status per such parentRef.
// parentRefs to other kinds or to Gateways that are not ours are left to
// their controllers.
func attachRoute(ro routeObject, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) {
	r := ro.r
	ref := model.ObjectRef{Kind: ro.kind, Namespace: r.Namespace, Name: r.Name}
	var pr *parsedRoute
	var parents []gwv1.RouteParentStatus
	for _, parent := range r.Spec.ParentRefs {
		p := gws[gatewayRefOf(parent, r.Namespace)]
		if p == nil || !isGatewayKind(parent) {
			continue
		}
		if pr == nil {
			pr = parseRoute(ro, x, opts, problems)
		}
		accepted, reason, msg := p.attach(pr, parent, namespaceLabelsOf(ns, r.Namespace))
		if accepted {
			for _, b := range pr.backends {
				x.tls.reached(p.ref, b.policies)
			}
		}
		parents = append(parents, parentStatus(parent, opts, r.Generation, accepted, reason, msg, pr.resolvedRefs()))
	}
	if len(parents) > 0 {
		st.Routes[ref] = parents
	}
}

// namesOurGateway reports whether one of a route's parentRefs names a
// Gateway of ours: only those count against MaxHTTPRoutes.
func namesOurGateway(r *gwv1.HTTPRoute, gws map[model.ObjectRef]*parsedGateway) bool {
	for _, parent := range r.Spec.ParentRefs {
		if isGatewayKind(parent) && gws[gatewayRefOf(parent, r.Namespace)] != nil {
			return true
		}
	}
	return false
}

// reasonTooManyHTTPRoutes refuses the routes past --max-httproutes,
// newest first, as TooManyIngresses does Ingresses.
const reasonTooManyHTTPRoutes = "TooManyHTTPRoutes"

// refuseRoute records a route past the cap or its namespace's quota:
// Accepted=False with reason on each parentRef of ours, attached to no
// listener (attachedRoutes does not count it), and an Error problem.
func refuseRoute(ro routeObject, gws map[model.ObjectRef]*parsedGateway, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem, reason, msg string) {
	r := ro.r
	var parents []gwv1.RouteParentStatus
	for _, parent := range r.Spec.ParentRefs {
		if !isGatewayKind(parent) || gws[gatewayRefOf(parent, r.Namespace)] == nil {
			continue
		}
		parents = append(parents, gwv1.RouteParentStatus{ParentRef: parent,
			ControllerName: gwv1.GatewayController(opts.GatewayControllerName),
			Conditions:     []metav1.Condition{condition(r.Generation, string(gwv1.RouteConditionAccepted), false, reason, msg)}})
	}
	st.Routes[model.ObjectRef{Kind: ro.kind, Namespace: r.Namespace, Name: r.Name}] = parents
	*problems = append(*problems, routeProblem(ro.kind, r, model.SeverityError, reason, "", msg))
}

// refuseGatewayOverQuota refuses a Gateway its namespace's quota has no
// room for: Accepted=False, no load balancer, and an Error problem.
func refuseGatewayOverQuota(p *parsedGateway, opts translate.Options, problems *[]model.Problem) {
	p.refusal = translate.ReasonQuotaExceeded
	p.refusalMessage = fmt.Sprintf("namespace %s already has %d Gateways served, the most one namespace may have (--max-gateways-per-namespace): the newest past it are refused",
		p.gw.Namespace, opts.MaxGatewaysPerNamespace)
	*problems = append(*problems, gatewayProblem(p.gw, p.refusal, "", p.refusalMessage))
}

// namespaceLabelsOf returns a namespace's labels. One missing from the
// snapshot (pier run's files rarely list Namespaces) still has the label
// the API server puts on every namespace, so a selector on
// kubernetes.io/metadata.name works in both modes.
func namespaceLabelsOf(all map[string]map[string]string, ns string) map[string]string {
	if l, ok := all[ns]; ok {
		return l
	}
	return map[string]string{"kubernetes.io/metadata.name": ns}
}

func parseRoute(ro routeObject, x *index, opts translate.Options, problems *[]model.Problem) *parsedRoute {
	r := ro.r
	pr := &parsedRoute{r: r, kind: ro.kind, counted: map[*gwListener]bool{}}
	pr.hosts, pr.rules, pr.refusal = parseRouteSpec(r, opts)
	if ro.refusal != nil {
		// What the GRPCRoute asked that its HTTPRoute form cannot say
		// comes first: the form's own findings would name its fields.
		pr.refusal = ro.refusal
	}
	if pr.refusal != nil {
		*problems = append(*problems, routeProblem(ro.kind, r, model.SeverityError, string(gwv1.RouteReasonUnsupportedValue),
			pr.refusal.field, pr.refusal.message+": the route is not served"))
		return pr
	}
	for i, rule := range r.Spec.Rules {
		b := x.rulePool(ro.kind, r, i, rule.BackendRefs, pr.rules[i].refFilters, opts)
		if len(rule.BackendRefs) == 0 && !answersItself(rule.Filters) {
			// Nothing to forward to and nothing that answers: 500,
			// as the spec asks (the suite's HTTPRouteNoBackendRefs).
			b.pool = nil
		}
		// timeouts, retry and sessionPersistence: a pool of the rule's own
		// (each pool of a split).
		b.pool = pr.rules[i].settings.applyTo(b.pool)
		for j := range b.pools {
			b.pools[j] = pr.rules[i].settings.applyTo(b.pools[j])
			b.split.Pools[j].PoolID = b.pools[j].ID
		}
		if ro.kind == model.KindGRPCRoute {
			b.pool = h2cPool(b.pool)
			for j := range b.pools {
				b.pools[j] = h2cPool(b.pools[j])
				b.split.Pools[j].PoolID = b.pools[j].ID
			}
		} else if b.mixedProtocols {
			*problems = append(*problems, routeProblem(ro.kind, r, model.SeverityWarning, string(gwv1.RouteReasonUnsupportedProtocol),
				fmt.Sprintf("spec.rules[%d].backendRefs", i),
				"some Service ports say appProtocol "+appProtocolH2C+" and some do not: the rule's one pool speaks HTTP/1.1 to all of them (a pool speaks one protocol: put the h2c Services in a rule of their own)"))
		}
		if b.unresolved != "" {
			*problems = append(*problems, routeProblem(ro.kind, r, model.SeverityWarning, b.unresolved,
				fmt.Sprintf("spec.rules[%d].backendRefs", i), b.detail+": that backend gets no requests"))
		}
		pr.backends = append(pr.backends, b)
	}
	return pr
}

func routeProblem(kind string, r *gwv1.HTTPRoute, sev model.Severity, reason, field, message string) model.Problem {
	return model.Problem{Kind: kind, Namespace: r.Namespace, Name: r.Name,
		Severity: sev, Reason: reason, Field: field, Message: message}
}

// resolvedRefs is the route's ResolvedRefs condition: the first backend
// that does not resolve names the reason.
func (pr *parsedRoute) resolvedRefs() metav1.Condition {
	for _, b := range pr.backends {
		if b.unresolved != "" {
			return resolvedRefsCondition(pr.r.Generation, b.unresolved, b.detail)
		}
	}
	return resolvedRefsCondition(pr.r.Generation, "", "")
}

// isGatewayKind reports whether a parentRef names a parent pier serves:
// a Gateway, or a ListenerSet (whose listeners its Gateway serves).
func isGatewayKind(p gwv1.ParentReference) bool {
	return (p.Group == nil || *p.Group == gwv1.GroupName) &&
		(p.Kind == nil || *p.Kind == model.KindGateway || *p.Kind == model.KindListenerSet)
}

// gatewayRefOf is the ref of the parent a parentRef names: a Gateway's,
// or a ListenerSet's, which the Gateways map also holds (pointing to the
// ListenerSet's Gateway).
func gatewayRefOf(p gwv1.ParentReference, routeNS string) model.ObjectRef {
	ns := routeNS
	if p.Namespace != nil {
		ns = string(*p.Namespace)
	}
	kind := model.KindGateway
	if p.Kind != nil && *p.Kind == model.KindListenerSet {
		kind = model.KindListenerSet
	}
	return model.ObjectRef{Kind: kind, Namespace: ns, Name: string(p.Name)}
}

// attach applies the spec's attachment rules for one parentRef: the
// listeners it selects (sectionName, port), those whose allowedRoutes
// take the route (counted in attachedRoutes, valid or not, when their
// hostnames intersect, even on a listener with unresolved references),
// then hostname intersection. It returns the Accepted condition.
func (p *parsedGateway) attach(pr *parsedRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
	if msg := p.parentRefusal(parent, pr.r.Namespace); msg != "" {
		return false, string(gwv1.RouteReasonNoMatchingParent), msg
	}
	selected := p.selectListeners(parent, pr.r.Namespace)
	if len(selected) == 0 {
		return false, string(gwv1.RouteReasonNoMatchingParent), "no listener matches sectionName and port"
	}
	var allowed []*gwListener
	for _, l := range selected {
		if !l.takes(pr.kind) || !p.allows(l, pr.r.Namespace, nsLabels) {
			continue
		}
		// attachedRoutes counts a route on a listener with unresolved
		// references too, but not on one none of whose hostnames the
		// route's intersect (the suite's GatewayWithAttachedRoutes).
		if !pr.counted[l] && len(intersectHosts(l.host, pr.hosts)) > 0 {
			pr.counted[l] = true
			l.attached++
		}
		if l.usable() {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return false, string(gwv1.RouteReasonNotAllowedByListeners), "no selected listener allows this route"
	}
	if pr.refusal != nil {
		return false, string(gwv1.RouteReasonUnsupportedValue), pr.refusal.field + ": " + pr.refusal.message
	}
	matched, conflicted := false, false
	for _, l := range allowed {
		hosts := intersectHosts(l.host, pr.hosts)
		if len(hosts) == 0 {
			continue
		}
		if l.servesOtherKind(pr.kind, hosts) {
			conflicted = true
			continue
		}
		matched = true
		l.served(pr.kind, hosts)
		p.addEntries(l, hosts, pr)
	}
	if !matched && conflicted {
		return false, reasonRouteKindConflict, "an older route of the other kind (HTTPRoute or GRPCRoute) already serves one of its hostnames on the listener"
	}
	if !matched {
		return false, string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches the listeners'"
	}
	return true, string(gwv1.RouteReasonAccepted), ""
}

// selectListeners are the listeners a parentRef's sectionName and port
// select (every one when it names neither), among those of the object it
// names: the Gateway's own for a Gateway (never a ListenerSet's, even of
// the same name), the ListenerSet's for a ListenerSet.
func (p *parsedGateway) selectListeners(parent gwv1.ParentReference, routeNS string) []*gwListener {
	var set *parsedListenerSet
	if ref := gatewayRefOf(parent, routeNS); ref.Kind == model.KindListenerSet {
		if set = p.sets[ref]; set == nil {
			return nil
		}
	}
	var selected []*gwListener
	for _, l := range p.listeners {
		if l.set != set {
			continue
		}
		if parent.SectionName != nil && *parent.SectionName != l.name {
			continue
		}
		if parent.Port != nil && int(*parent.Port) != l.port {
			continue
		}
		selected = append(selected, l)
	}
	return selected
}

// allows applies a listener's allowedRoutes.namespaces: Same (the
// default), All, or a label selector on the route's namespace.
func (p *parsedGateway) allows(l *gwListener, routeNS string, nsLabels map[string]string) bool {
	from := gwv1.NamespacesFromSame
	var sel *metav1.LabelSelector
	if ar := l.allowedRoutes; ar != nil && ar.Namespaces != nil {
		if f := ar.Namespaces.From; f != nil {
			from = *f
		}
		sel = ar.Namespaces.Selector
	}
	switch from {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		// The namespace of the listener's owner: a ListenerSet's listener
		// takes the routes of the ListenerSet's namespace.
		return routeNS == l.namespace
	case gwv1.NamespacesFromSelector:
		if sel == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && s.Matches(labels.Set(nsLabels))
	}
	return false
}

// addEntries records every (host, rule, match) of a route on a listener.
func (p *parsedGateway) addEntries(l *gwListener, hosts []string, pr *parsedRoute) {
	hosts = p.ownedHosts(l, hosts) // listener isolation
	for ri, rule := range pr.rules {
		b := pr.backends[ri]
		pool, poolID, status := b.pool, "", http.StatusInternalServerError
		if pool != nil {
			if _, ok := p.pools[pool.ID]; !ok {
				p.pools[pool.ID] = pool
			}
			poolID, status = pool.ID, 0
		}
		for _, sp := range b.pools {
			if _, ok := p.pools[sp.ID]; !ok {
				p.pools[sp.ID] = sp
			}
		}
		for mi, m := range rule.matches {
			for _, h := range hosts {
				p.entries[l.port] = append(p.entries[l.port], gwEntry{
					host: h, match: m, poolID: poolID, status: status, route: pr.r, kind: pr.kind, rule: ri, index: mi,
					options: withSplit(rule.filters.options(m, l.protocol, l.port), b.split),
					breadth: hostBreadth(originalHost(pr.hosts, h), h),
				})
			}
		}
	}
}

// answersItself reports whether a rule's filters answer the request
// themselves (a RequestRedirect), so it needs no backend.
func answersItself(filters []gwv1.HTTPRouteFilter) bool {
	for _, f := range filters {
		if f.Type == gwv1.HTTPRouteFilterRequestRedirect {
			return true
		}
	}
	return false
}

// parentStatus is a route's status on one parent of ours: Accepted as the
// attachment said, and the route's ResolvedRefs (the same on every parent).
func parentStatus(parent gwv1.ParentReference, opts translate.Options, generation int64, accepted bool, reason, msg string,
	resolved metav1.Condition) gwv1.RouteParentStatus {
	return gwv1.RouteParentStatus{
		ParentRef:      parent,
		ControllerName: gwv1.GatewayController(opts.GatewayControllerName),
		Conditions: []metav1.Condition{
			condition(generation, string(gwv1.RouteConditionAccepted), accepted, reason, msg),
			resolved,
		},
	}
}

// attachL4Routes attaches every route of one connection-level kind
// (TCPRoute, TLSRoute, UDPRoute) that names a Gateway of ours, oldest
// first, and records its parents' status: the route is parsed once, for
// its first parent of ours, and attach decides each parent.
func attachL4Routes[R metav1.Object, P interface{ resolvedRefs() metav1.Condition }](routes []R, kind string,
	parentRefs func(R) []gwv1.ParentReference, parse func(R) P,
	attach func(*parsedGateway, P, gwv1.ParentReference, map[string]string) (bool, string, string),
	gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string, opts translate.Options, st *translate.GatewayStatus) {
	for _, r := range oldestObjects(routes) {
		var route P
		parsed := false
		var parents []gwv1.RouteParentStatus
		for _, parent := range parentRefs(r) {
			p := gws[gatewayRefOf(parent, r.GetNamespace())]
			if p == nil || !isGatewayKind(parent) {
				continue
			}
			if !parsed {
				route, parsed = parse(r), true
			}
			accepted, reason, msg := attach(p, route, parent, namespaceLabelsOf(ns, r.GetNamespace()))
			parents = append(parents, parentStatus(parent, opts, r.GetGeneration(), accepted, reason, msg, route.resolvedRefs()))
		}
		if len(parents) > 0 {
			st.Routes[model.ObjectRef{Kind: kind, Namespace: r.GetNamespace(), Name: r.GetName()}] = parents
		}
	}
}

// allowedL4Listeners is the attachment step the TCPRoute, UDPRoute and
// TLSRoute kinds share, as an HTTPRoute's attach does it (sectionName and
// port, allowedRoutes kinds and namespaces): the usable listeners of the
// parentRef that take kind and allow the route's namespace. Each of those
// listeners, usable or not, counts the route once in attachedRoutes when
// counts says so (nil: always), as the spec counts routes a listener
// allows. A reason is returned when the route attaches nowhere: the
// Gateway refused, no listener selected, none allowing it (notAllowed
// says what would), or the route refused by its own content.
func (p *parsedGateway) allowedL4Listeners(kind, namespace string, parent gwv1.ParentReference, nsLabels map[string]string,
	counted map[*gwListener]bool, counts func(*gwListener) bool, refusal *routeRefusal, notAllowed string) ([]*gwListener, string, string) {
	if msg := p.parentRefusal(parent, namespace); msg != "" {
		return nil, string(gwv1.RouteReasonNoMatchingParent), msg
	}
	selected := p.selectListeners(parent, namespace)
	if len(selected) == 0 {
		return nil, string(gwv1.RouteReasonNoMatchingParent), "no listener matches sectionName and port"
	}
	var allowed []*gwListener
	for _, l := range selected {
		if !l.takes(kind) || !p.allows(l, namespace, nsLabels) {
			continue
		}
		if !counted[l] && (counts == nil || counts(l)) {
			counted[l] = true
			l.attached++
		}
		if l.usable() {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return nil, string(gwv1.RouteReasonNotAllowedByListeners), notAllowed
	}
	if refusal != nil {
		return nil, string(gwv1.RouteReasonUnsupportedValue), refusal.field + ": " + refusal.message
	}
	return allowed, "", ""
}

// resolvedRefsCondition is a route's ResolvedRefs: false with the reason
// and detail of its first unresolved backend, else true.
func resolvedRefsCondition(generation int64, unresolved, detail string) metav1.Condition {
	if unresolved != "" {
		return condition(generation, string(gwv1.RouteConditionResolvedRefs), false, unresolved, detail)
	}
	return condition(generation, string(gwv1.RouteConditionResolvedRefs), true, string(gwv1.RouteReasonResolvedRefs), "")
}
