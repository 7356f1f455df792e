package gatewayapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// A TCPRoute forwards the connections of the TCP listeners it attaches
// to, whole, to its backendRefs (render: a mode tcp frontend on the
// Gateway's addresses, beside its HTTP ones). A connection carries no
// host, path or header to choose by, so:
//
//   - a TCPRoute has one rule (a second could never be chosen): one of
//     more rules is refused, UnsupportedValue;
//   - a TCP listener serves one TCPRoute, the oldest (then the first by
//     namespace/name, the order routes attach in). A newer one is
//     Accepted, as the spec's rule for conflicts has it (the listener
//     counts it in attachedRoutes too), but carries no traffic there
//     while the older one does: its Accepted message and a Warning
//     (ListenerInUse) say so, and it is served once the older one goes;
//   - the rule's backendRefs are resolved as an HTTPRoute rule's
//     (Services, weights, ReferenceGrants from TCPRoutes), into one TCP
//     pool: members weighted by their Service's share, and the share of
//     refs that do not resolve refused connections (the spec: "connection
//     rejections must respect weight"); when none resolves the listener
//     refuses every connection.

var routeKindTCP = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: model.KindTCPRoute}

// reasonListenerInUse is the Warning on a TCPRoute or UDPRoute a listener
// does not serve because an older route already does.
const reasonListenerInUse = "ListenerInUse"

// tcpRoute is a TCPRoute parsed once for all its parentRefs.
type tcpRoute struct {
	r       *gwv1alpha2.TCPRoute
	refusal *routeRefusal
	backend backendResult
	counted map[*gwListener]bool
	problem func(sev model.Severity, reason, field, msg string)
}

// attachTCPRoutes attaches every TCPRoute naming a Gateway of ours,
// oldest first, and records its parents' status.
func attachTCPRoutes(routes []*gwv1alpha2.TCPRoute, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) {
	attachL4Routes(routes, model.KindTCPRoute, func(r *gwv1alpha2.TCPRoute) []gwv1.ParentReference { return r.Spec.ParentRefs },
		func(r *gwv1alpha2.TCPRoute) *tcpRoute { return parseTCPRoute(r, x, opts, problems) }, (*parsedGateway).attachTCP, gws, ns, opts, st)
}

// parseTCPRoute checks the rule and resolves its backendRefs to a TCP
// pool (nil: connections are refused).
func parseTCPRoute(r *gwv1alpha2.TCPRoute, x *index, opts translate.Options, problems *[]model.Problem) *tcpRoute {
	problem := func(sev model.Severity, reason, field, msg string) {
		*problems = append(*problems, model.Problem{Kind: model.KindTCPRoute, Namespace: r.Namespace, Name: r.Name,
			Severity: sev, Reason: reason, Field: field, Message: msg})
	}
	tr := &tcpRoute{r: r, counted: map[*gwListener]bool{}, problem: problem}
	if n := len(r.Spec.Rules); n != 1 {
		tr.refusal = &routeRefusal{"spec.rules", fmt.Sprintf(
			"%d rules: pier serves a TCPRoute of one rule (a connection carries nothing to choose between rules by)", n)}
		problem(model.SeverityError, string(gwv1.RouteReasonUnsupportedValue), tr.refusal.field, tr.refusal.message+": the route is not served")
		return tr
	}
	refs := make([]gwv1.HTTPBackendRef, 0, len(r.Spec.Rules[0].BackendRefs))
	for _, ref := range r.Spec.Rules[0].BackendRefs {
		refs = append(refs, gwv1.HTTPBackendRef{BackendRef: ref})
	}
	// The pool's names and IDs come from the route's namespace and name,
	// as an HTTPRoute rule's.
	tr.backend = x.rulePool(model.KindTCPRoute, &gwv1.HTTPRoute{ObjectMeta: r.ObjectMeta}, 0, refs, nil, opts)
	tr.backend.pool = plainTCP(tcpPool(tr.backend.pool))
	if len(refs) == 0 {
		tr.backend.pool = nil // the API server refuses this; a file may not
		tr.backend.unresolved, tr.backend.detail = string(gwv1.RouteReasonBackendNotFound), "spec.rules[0].backendRefs: none"
	}
	if tr.backend.unresolved != "" {
		problem(model.SeverityWarning, tr.backend.unresolved, "spec.rules[0].backendRefs",
			tr.backend.detail+": that backend's share of connections is refused")
	}
	return tr
}

// tcpPool is the TCP form of a pool a TCPRoute's rule resolved to: a
// pool of its own, apart from the HTTP pools of the same Services.
func tcpPool(p *model.Pool) *model.Pool {
	if p == nil {
		return nil
	}
	t := *p
	t.TCP = true
	t.ID = model.ID("tcp", p.ID)
	t.Name = p.Name + "_tcp"
	return &t
}

// plainTCP is p without TLS towards its members: a BackendTLSPolicy
// applies to the Service's HTTP and GRPC routes and to TLSRoutes whose
// listener terminates, not to a TCPRoute's or a passthrough listener's
// connections, which carry the client's bytes (often its own TLS) as
// they came.
func plainTCP(p *model.Pool) *model.Pool {
	if p == nil || p.UpstreamTLS == nil {
		return p
	}
	t := *p
	t.Protocol, t.UpstreamTLS = "", nil
	t.ID = model.ID("plain", p.ID)
	t.Name = p.Name + "_plain"
	return &t
}

func (tr *tcpRoute) resolvedRefs() metav1.Condition {
	return resolvedRefsCondition(tr.r.Generation, tr.backend.unresolved, tr.backend.detail)
}

// attachTCP applies the attachment rules for one parentRef, as attach
// does an HTTPRoute's (sectionName and port, allowedRoutes kinds and
// namespaces), with one route per TCP listener instead of hostnames.
func (p *parsedGateway) attachTCP(tr *tcpRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
	allowed, reason, msg := p.allowedL4Listeners(model.KindTCPRoute, tr.r.Namespace, parent, nsLabels, tr.counted, nil, tr.refusal,
		"no selected listener allows this route (a TCP listener whose allowedRoutes take TCPRoutes from its namespace)")
	if reason != "" {
		return false, reason, msg
	}
	matched := false
	var servedBy *tcpRoute
	for _, l := range allowed {
		if l.tcpRoute != nil && l.tcpRoute != tr {
			servedBy = l.tcpRoute
			continue
		}
		matched = true
		l.tcpRoute = tr
	}
	if matched {
		return true, string(gwv1.RouteReasonAccepted), ""
	}
	msg = fmt.Sprintf("accepted but not served: the older TCPRoute %s/%s serves the listener (a TCP listener serves its oldest route; this one is served once that one goes)",
		servedBy.r.Namespace, servedBy.r.Name)
	tr.problem(model.SeverityWarning, reasonListenerInUse, "spec.parentRefs", msg)
	return true, string(gwv1.RouteReasonAccepted), msg
}
