package gatewayapi

import (
	"fmt"
	"sort"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// A UDPRoute forwards the datagrams of the UDP listeners it attaches to,
// to the endpoints of its one backend Service. HAProxy has no UDP: a UDP
// listener becomes a model listener of protocol UDP in the Gateway's own
// load balancer (same VIP, FIP and pair), which the agent hands to the
// native provider, nftables, while HAProxy serves the others
// (agent/splitdriver). So:
//
//   - a UDPRoute has one rule, as a TCPRoute (a datagram carries nothing
//     to choose between rules by), and that rule one backendRef: the
//     native provider spreads flows evenly over endpoints and has no
//     weights, so a share between Services could not be kept; several
//     refs are refused (UnsupportedValue) rather than served with shares
//     that follow endpoint counts instead of weights;
//   - a UDP listener serves one UDPRoute, the oldest (ListenerInUse for
//     the others);
//   - the backend is a Service port of protocol UDP; its ready IPv4
//     endpoints on that port are the members, as for a native Service.
//     When it does not resolve (or weighs 0), the listener answers ICMP
//     port unreachable, as a native Service without endpoints.
//
// A UDP listener may share its port with a TCP, HTTP or HTTPS listener
// (DNS on 53): a port number belongs to one transport protocol.

var routeKindUDP = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: model.KindUDPRoute}

// udpRoute is a UDPRoute parsed once for all its parentRefs.
type udpRoute struct {
	r       *gwv1alpha2.UDPRoute
	refusal *routeRefusal
	pool    *model.Pool // nil: datagrams are refused
	// unresolved and detail are the ResolvedRefs reason and message when
	// the backendRef does not resolve.
	unresolved, detail string
	counted            map[*gwListener]bool
}

// parseUDPListener completes a listener of protocol UDP.
func parseUDPListener(l *gwListener, spec *gwv1.Listener) (reason gwv1.ListenerConditionReason, msg string) {
	// The API server refuses both; a manifest file may not.
	if spec.Hostname != nil {
		return gwv1.ListenerReasonInvalid, "a UDP listener has no hostname"
	}
	if spec.TLS != nil {
		return gwv1.ListenerReasonInvalid, "a UDP listener has no tls"
	}
	l.protocol = model.ProtocolUDP
	return "", ""
}

// udpRouteKinds are the kinds a UDP listener takes: UDPRoute, or, when the
// user listed kinds, UDPRoute if listed.
func udpRouteKinds(ar *gwv1.AllowedRoutes) []gwv1.RouteGroupKind {
	if ar == nil || len(ar.Kinds) == 0 {
		return []gwv1.RouteGroupKind{routeKindUDP}
	}
	for _, k := range ar.Kinds {
		if (k.Group == nil || *k.Group == gwv1.GroupName) && k.Kind == model.KindUDPRoute {
			return []gwv1.RouteGroupKind{routeKindUDP}
		}
	}
	return nil
}

// attachUDPRoutes attaches every UDPRoute naming a Gateway of ours,
// oldest first, and records its parents' status.
func attachUDPRoutes(routes []*gwv1alpha2.UDPRoute, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) {
	attachL4Routes(routes, model.KindUDPRoute, func(r *gwv1alpha2.UDPRoute) []gwv1.ParentReference { return r.Spec.ParentRefs },
		func(r *gwv1alpha2.UDPRoute) *udpRoute { return parseUDPRoute(r, x, opts, problems) }, (*parsedGateway).attachUDP, gws, ns, opts, st)
}

// parseUDPRoute checks the rule and resolves its backendRef to a UDP pool.
func parseUDPRoute(r *gwv1alpha2.UDPRoute, x *index, opts translate.Options, problems *[]model.Problem) *udpRoute {
	ur := &udpRoute{r: r, counted: map[*gwListener]bool{}}
	problem := func(sev model.Severity, reason, field, msg string) {
		*problems = append(*problems, model.Problem{Kind: model.KindUDPRoute, Namespace: r.Namespace, Name: r.Name,
			Severity: sev, Reason: reason, Field: field, Message: msg})
	}
	refuse := func(field, msg string) *udpRoute {
		ur.refusal = &routeRefusal{field, msg}
		problem(model.SeverityError, string(gwv1.RouteReasonUnsupportedValue), field, msg+": the route is not served")
		return ur
	}
	if n := len(r.Spec.Rules); n != 1 {
		return refuse("spec.rules", fmt.Sprintf(
			"%d rules: pier serves a UDPRoute of one rule (a datagram carries nothing to choose between rules by)", n))
	}
	refs := r.Spec.Rules[0].BackendRefs
	switch {
	case len(refs) > 1:
		return refuse("spec.rules[0].backendRefs", fmt.Sprintf(
			"%d backendRefs: pier serves a UDPRoute of one backendRef (the native provider spreads flows evenly over endpoints and has no weights, so a share between Services cannot be kept)", len(refs)))
	case len(refs) == 0:
		// The API server refuses this; a file may not.
		ur.unresolved, ur.detail = string(gwv1.RouteReasonBackendNotFound), "spec.rules[0].backendRefs: none"
	default:
		ur.pool, ur.unresolved, ur.detail = x.udpPool(r.Namespace, refs[0], opts)
		if ur.unresolved != "" {
			ur.detail = "spec.rules[0].backendRefs[0]: " + ur.detail
		}
	}
	if ur.unresolved != "" {
		problem(model.SeverityWarning, ur.unresolved, "spec.rules[0].backendRefs",
			ur.detail+": the listener's datagrams are refused (ICMP port unreachable)")
	}
	return ur
}

// udpPool resolves a UDPRoute's backendRef: a core Service of the route's
// namespace, or of another whose ReferenceGrant permits UDPRoutes of it,
// with a UDP port of that number. A weight of 0 resolves to no pool: no
// datagram is forwarded.
func (x *index) udpPool(routeNS string, ref gwv1.BackendRef, opts translate.Options) (*model.Pool, string, string) {
	weight := int32(1)
	if ref.Weight != nil {
		weight = *ref.Weight
	}
	if weight < 0 || weight > maxRefWeight {
		return nil, string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("weight %d is outside 0-%d", weight, maxRefWeight)
	}
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return nil, string(gwv1.RouteReasonInvalidKind), "only core Services are supported as backends"
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, string(gwv1.RouteReasonBackendNotFound), "invalid namespace " + translate.Quote(ns)
		}
	}
	name := string(ref.Name)
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return nil, string(gwv1.RouteReasonBackendNotFound), "invalid service name " + translate.Quote(name)
	}
	if !x.grants.permits(model.KindUDPRoute, routeNS, "Service", ns, name) {
		return nil, string(gwv1.RouteReasonRefNotPermitted), fmt.Sprintf(
			"service %s/%s is in another namespace and no ReferenceGrant there permits UDPRoutes of %s", ns, name, routeNS)
	}
	if ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535 {
		return nil, string(gwv1.RouteReasonBackendNotFound), "a Service backend needs a port (1-65535)"
	}
	port := *ref.Port
	svc := x.Service(ns, name)
	if svc == nil {
		return nil, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s not found", ns, name)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s is of type ExternalName, which pier does not forward to", ns, name)
	}
	sp := translate.UDPServicePort(svc, port)
	if sp == nil {
		return nil, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s has no UDP port %d", ns, name, port)
	}
	if weight == 0 {
		return nil, "", ""
	}
	members, _ := x.UDPMembers(svc, sp, opts.Members)
	portKey := "udp-" + strconv.Itoa(int(port))
	return &model.Pool{ID: model.ID("udp-pool", ns, name, portKey), Name: ns + "_" + name + "_" + portKey,
		Namespace: ns, Service: name, Port: strconv.Itoa(int(port)), Algorithm: model.AlgorithmRoundRobin, Members: members}, "", ""
}

func (ur *udpRoute) resolvedRefs() metav1.Condition {
	return resolvedRefsCondition(ur.r.Generation, ur.unresolved, ur.detail)
}

// attachUDP applies the attachment rules for one parentRef, as attachTCP
// does a TCPRoute's: one route per UDP listener.
func (p *parsedGateway) attachUDP(ur *udpRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
	if p.refusal != "" {
		return false, string(gwv1.RouteReasonNoMatchingParent), "the Gateway is not accepted"
	}
	selected := p.selectListeners(parent)
	if len(selected) == 0 {
		return false, string(gwv1.RouteReasonNoMatchingParent), "no listener matches sectionName and port"
	}
	var allowed []*gwListener
	for _, l := range selected {
		if !l.takes(model.KindUDPRoute) || !p.allows(l, ur.r.Namespace, nsLabels) {
			continue
		}
		if !ur.counted[l] {
			ur.counted[l] = true
			l.attached++
		}
		if l.usable() {
			allowed = append(allowed, l)
		}
	}
	if len(allowed) == 0 {
		return false, string(gwv1.RouteReasonNotAllowedByListeners), "no selected listener allows this route (a UDP listener whose allowedRoutes take UDPRoutes from its namespace)"
	}
	if ur.refusal != nil {
		return false, string(gwv1.RouteReasonUnsupportedValue), ur.refusal.field + ": " + ur.refusal.message
	}
	matched := false
	for _, l := range allowed {
		if l.udpRoute != nil && l.udpRoute != ur {
			continue
		}
		matched = true
		l.udpRoute = ur
	}
	if !matched {
		return false, reasonListenerInUse, "an older UDPRoute already serves the listener: a UDP listener serves one route"
	}
	return true, string(gwv1.RouteReasonAccepted), ""
}

// udpListeners are the model listeners of the Gateway's usable UDP
// listeners, by port, each with its route's pool (none: refused), and
// those pools.
func (p *parsedGateway) udpListeners() ([]model.Listener, []*model.Pool) {
	var out []model.Listener
	var pools []*model.Pool
	for _, l := range p.listeners {
		if l.protocol != model.ProtocolUDP || !l.usable() {
			continue
		}
		ml := model.Listener{Name: modelListenerName(l.protocol, l.port), Protocol: model.ProtocolUDP, Port: l.port}
		if l.udpRoute != nil && l.udpRoute.pool != nil {
			ml.DefaultPoolID = l.udpRoute.pool.ID
			pools = append(pools, l.udpRoute.pool)
		}
		out = append(out, ml)
	}
	// Two usable UDP listeners never share a port (markConflicts).
	sort.Slice(out, func(i, j int) bool { return out[i].Port < out[j].Port })
	return out, pools
}
