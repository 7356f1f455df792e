package gatewayapi

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// A UDPRoute forwards the datagrams of the UDP listeners it attaches to,
// to the endpoints of its backend Services. HAProxy has no UDP: a UDP
// listener becomes a model listener of protocol UDP in the Gateway's own
// load balancer (same VIP, FIP and pair), which the agent hands to the
// native provider, nftables, while HAProxy serves the others
// (agent/splitdriver). So:
//
//   - a UDPRoute has one rule, as a TCPRoute (a datagram carries nothing
//     to choose between rules by), of at most 16 backendRefs (the CRD's
//     maximum; a file may hold more: refused, UnsupportedValue);
//   - a UDP listener serves one UDPRoute, the oldest; a newer one is
//     Accepted there but carries no traffic, as a TCPRoute (tcproutes.go);
//   - each backend is a Service port of protocol UDP; its ready IPv4
//     endpoints on that port are the members, as for a native Service.
//     One backendRef is that Service's pool. Several make one pool of
//     all their members, each weighing its Service's weight over its
//     endpoint count (udpSplitMembers), which the native table turns
//     into that many slots of its endpoint map: new flows follow the
//     weights whatever each Service's endpoint count. A ref of weight 0
//     gets no flow. The spec's UDPRouteRule.backendRefs: a backend that
//     does not resolve "or a Service with no endpoints" is invalid and
//     its share must be refused ("if an invalid backend is requested to
//     have 80% of the packets, then 80% of packets must be dropped"), so
//     those refs' weights become the pool's fail share (FailWeight of
//     FailTotal), which the table refuses with ICMP port unreachable
//     before it picks an endpoint: their share is not given to the
//     others. When no ref has endpoints (or all weigh 0), the listener
//     answers ICMP port unreachable, as a native Service without
//     endpoints.
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
	problem            func(sev model.Severity, reason, field, msg string)
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
	problem := func(sev model.Severity, reason, field, msg string) {
		*problems = append(*problems, model.Problem{Kind: model.KindUDPRoute, Namespace: r.Namespace, Name: r.Name,
			Severity: sev, Reason: reason, Field: field, Message: msg})
	}
	ur := &udpRoute{r: r, counted: map[*gwListener]bool{}, problem: problem}
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
	case len(refs) > maxUDPRefs:
		return refuse("spec.rules[0].backendRefs", fmt.Sprintf(
			"%d backendRefs: pier serves a UDPRoute rule of at most %d (the CRD's maximum)", len(refs), maxUDPRefs))
	case len(refs) == 0:
		// The API server refuses this; a file may not.
		ur.unresolved, ur.detail = string(gwv1.RouteReasonBackendNotFound), "spec.rules[0].backendRefs: none"
	case len(refs) == 1:
		ur.pool, ur.unresolved, ur.detail = x.udpPool(r.Namespace, refs[0], opts)
		if ur.unresolved != "" {
			ur.detail = "spec.rules[0].backendRefs[0]: " + ur.detail
		}
	default:
		ur.pool, ur.unresolved, ur.detail = x.udpSplitPool(r, refs, opts)
	}
	if ur.unresolved != "" {
		consequence := "the listener's datagrams are refused (ICMP port unreachable)"
		if ur.pool != nil {
			consequence = "its share of the listener's new flows is refused (ICMP port unreachable)"
		}
		problem(model.SeverityWarning, ur.unresolved, "spec.rules[0].backendRefs", ur.detail+": "+consequence)
	}
	return ur
}

// maxUDPRefs bounds a UDPRoute rule's backendRefs (the CRD's maximum):
// the weights' sum stays below 2^24, far inside the native table's
// bounds.
const maxUDPRefs = 16

// udpBackend is one resolved backendRef of a UDPRoute.
type udpBackend struct {
	ns, svc string
	port    int32
	weight  int32
	members []model.Member
}

// udpSplitPool resolves a rule of several backendRefs to one pool (see
// the comment at the top of this file): nil when no ref has endpoints,
// the Service's pool when one ref has them and no other's share is
// refused, else a pool of the refs' members weighted by their share,
// with the share of the refs that do not resolve or have no endpoint as
// its fail share. The ResolvedRefs reason and message are the first
// failing ref's.
func (x *index) udpSplitPool(r *gwv1alpha2.UDPRoute, refs []gwv1.BackendRef, opts translate.Options) (*model.Pool, string, string) {
	var ok []udpBackend
	var fail, total int
	var unresolved, detail string
	for i, ref := range refs {
		b, reason, msg := x.resolveUDP(r.Namespace, ref, opts)
		if reason != "" {
			if unresolved == "" {
				unresolved, detail = reason, fmt.Sprintf("spec.rules[0].backendRefs[%d]: %s", i, msg)
			}
			if b.weight > 0 && b.weight <= maxRefWeight {
				fail, total = fail+int(b.weight), total+int(b.weight)
			}
			continue
		}
		if b.weight == 0 {
			continue
		}
		total += int(b.weight)
		if len(b.members) == 0 {
			fail += int(b.weight)
			continue
		}
		ok = append(ok, b)
	}
	switch {
	case len(ok) == 0:
		return nil, unresolved, detail
	case len(ok) == 1 && fail == 0:
		return ok[0].pool(), unresolved, detail
	}
	parts := make([]string, 0, len(ok)+1)
	var svcs, ports []string
	for _, b := range ok {
		parts = append(parts, fmt.Sprintf("%s/%s:%d:%d", b.ns, b.svc, b.port, b.weight))
		svcs, ports = append(svcs, b.svc), append(ports, strconv.Itoa(int(b.port)))
	}
	pool := &model.Pool{Namespace: r.Namespace, Algorithm: model.AlgorithmRoundRobin, Members: udpSplitMembers(ok),
		Service: strings.Join(svcs, "+"), Port: strings.Join(ports, "+")}
	if fail > 0 {
		parts = append(parts, fmt.Sprintf("refused:%d:%d", fail, total))
		pool.FailWeight, pool.FailTotal = fail, total
	}
	pool.ID = model.ID(append([]string{"udp-split", r.Namespace}, parts...)...)
	pool.Name = r.Namespace + "_udpsplit_" + pool.ID[:8]
	return pool, unresolved, detail
}

// maxShareScale bounds the common multiple udpSplitMembers scales the
// weights by.
const maxShareScale = 1 << 20

// udpSplitMembers gives each member of ref i the weight
// weight_i * K / members_i, K the least common multiple of the refs'
// endpoint counts: exact integers, so a Service's share is its weight's
// whatever its endpoint count (70 and 30 over two endpoints and one:
// 70, 70 and 60). Endpoint counts whose multiple passes 2^20 (101, 103
// and 107 endpoints) scale by 2^20 instead and round down: each member's
// weight is then off by less than one part in 2^20 of a ref of weight 1
// on one endpoint, far below the native table's slot. An endpoint two
// refs share adds up both weights.
func udpSplitMembers(bs []udpBackend) []model.Member {
	k := 1
	for _, b := range bs {
		n := len(b.members)
		k = k / gcdInt(k, n) * n
		if k > maxShareScale {
			k = maxShareScale
			break
		}
	}
	type endpoint struct {
		addr string
		port int
	}
	at := map[endpoint]int{}
	var out []model.Member
	for _, b := range bs {
		w := max(1, int(b.weight)*k/len(b.members))
		for _, m := range b.members {
			e := endpoint{m.Address, m.Port}
			if i, seen := at[e]; seen {
				out[i].Weight += w
				continue
			}
			at[e] = len(out)
			m.Weight = w
			out = append(out, m)
		}
	}
	return translate.SortMembers(out)
}

func gcdInt(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// udpPool resolves a UDPRoute's only backendRef to its Service's pool.
// A weight of 0 resolves to no pool: no datagram is forwarded.
func (x *index) udpPool(routeNS string, ref gwv1.BackendRef, opts translate.Options) (*model.Pool, string, string) {
	b, reason, msg := x.resolveUDP(routeNS, ref, opts)
	if reason != "" || b.weight == 0 {
		return nil, reason, msg
	}
	return b.pool(), "", ""
}

// pool is the Service's UDP pool, which every route to it shares.
func (b udpBackend) pool() *model.Pool {
	portKey := "udp-" + strconv.Itoa(int(b.port))
	return &model.Pool{ID: model.ID("udp-pool", b.ns, b.svc, portKey), Name: b.ns + "_" + b.svc + "_" + portKey,
		Namespace: b.ns, Service: b.svc, Port: strconv.Itoa(int(b.port)), Algorithm: model.AlgorithmRoundRobin, Members: b.members}
}

// resolveUDP resolves a UDPRoute's backendRef: a core Service of the
// route's namespace, or of another whose ReferenceGrant permits
// UDPRoutes of it, with a UDP port of that number, and its ready
// endpoints there (none for a ref of weight 0).
func (x *index) resolveUDP(routeNS string, ref gwv1.BackendRef, opts translate.Options) (udpBackend, string, string) {
	b := udpBackend{weight: 1}
	if ref.Weight != nil {
		b.weight = *ref.Weight
	}
	if b.weight < 0 || b.weight > maxRefWeight {
		return b, string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("weight %d is outside 0-%d", b.weight, maxRefWeight)
	}
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return b, string(gwv1.RouteReasonInvalidKind), "only core Services are supported as backends"
	}
	ns := routeNS
	if ref.Namespace != nil {
		ns = string(*ref.Namespace)
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return b, string(gwv1.RouteReasonBackendNotFound), "invalid namespace " + translate.Quote(ns)
		}
	}
	name := string(ref.Name)
	if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
		return b, string(gwv1.RouteReasonBackendNotFound), "invalid service name " + translate.Quote(name)
	}
	if !x.grants.permits(model.KindUDPRoute, routeNS, "Service", ns, name) {
		return b, string(gwv1.RouteReasonRefNotPermitted), fmt.Sprintf(
			"service %s/%s is in another namespace and no ReferenceGrant there permits UDPRoutes of %s", ns, name, routeNS)
	}
	if ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535 {
		return b, string(gwv1.RouteReasonBackendNotFound), "a Service backend needs a port (1-65535)"
	}
	port := *ref.Port
	svc := x.Service(ns, name)
	if svc == nil {
		return b, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s not found", ns, name)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return b, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s is of type ExternalName, which pier does not forward to", ns, name)
	}
	sp := translate.UDPServicePort(svc, port)
	if sp == nil {
		return b, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s has no UDP port %d", ns, name, port)
	}
	b.ns, b.svc, b.port = ns, name, port
	if b.weight > 0 {
		b.members, _ = x.UDPMembers(svc, sp, opts.Members)
	}
	return b, "", ""
}

func (ur *udpRoute) resolvedRefs() metav1.Condition {
	return resolvedRefsCondition(ur.r.Generation, ur.unresolved, ur.detail)
}

// attachUDP applies the attachment rules for one parentRef, as attachTCP
// does a TCPRoute's: one route per UDP listener.
func (p *parsedGateway) attachUDP(ur *udpRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
	allowed, reason, msg := p.allowedL4Listeners(model.KindUDPRoute, ur.r.Namespace, parent, nsLabels, ur.counted, nil, ur.refusal,
		"no selected listener allows this route (a UDP listener whose allowedRoutes take UDPRoutes from its namespace)")
	if reason != "" {
		return false, reason, msg
	}
	matched := false
	var servedBy *udpRoute
	for _, l := range allowed {
		if l.udpRoute != nil && l.udpRoute != ur {
			servedBy = l.udpRoute
			continue
		}
		matched = true
		l.udpRoute = ur
	}
	if !matched {
		msg = fmt.Sprintf("accepted but not served: the older UDPRoute %s/%s serves the listener (a UDP listener serves its oldest route; this one is served once that one goes)",
			servedBy.r.Namespace, servedBy.r.Name)
		ur.problem(model.SeverityWarning, reasonListenerInUse, "spec.parentRefs", msg)
		return true, string(gwv1.RouteReasonAccepted), msg
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
