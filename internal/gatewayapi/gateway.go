// Package gatewayapi translates the Gateway API (GatewayClasses,
// Gateways, HTTPRoutes, GRPCRoutes, TCPRoutes, TLSRoutes, ReferenceGrants) into load
// balancers, as translate does Ingresses: a pure function of a snapshot,
// no I/O. It builds pools, members, certificates and quotas with
// translate's parts, so a route's backend is the pool an Ingress's would
// be, and returns a translate.Result, which the caller merges with the
// others.
package gatewayapi

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// Translate translates every Gateway of our GatewayClasses into one load
// balancer each (provider haproxy), the HTTPRoutes and GRPCRoutes
// attached to them into its policies and pools, and the TCPRoutes into
// its TCP listeners' pools, and the TLSRoutes into its TLS listeners'
// SNI routes. An invalid listener or route is refused
// with its condition; every other one is translated.
func Translate(snap *source.Snapshot, opts translate.Options) *translate.Result {
	res := &translate.Result{Accepted: map[model.ObjectRef]string{}, Ours: map[model.ObjectRef]bool{}, AddressRefused: map[string]bool{}}
	st := &translate.GatewayStatus{
		Classes:  map[string][]metav1.Condition{},
		Gateways: map[model.ObjectRef]gwv1.GatewayStatus{},
		Routes:   map[model.ObjectRef][]gwv1.RouteParentStatus{},

		Infrastructure: map[model.ObjectRef]translate.GatewayInfrastructure{},
		Policies:       map[model.ObjectRef][]gwv1.PolicyAncestorStatus{},

		ListenerSets:         map[model.ObjectRef]translate.ListenerSetStatus{},
		AttachedListenerSets: map[model.ObjectRef]int32{},
	}
	res.Gateway = st
	classes := gatewayClasses(snap.GatewayClasses, opts, st, &res.Problems)
	if len(classes) == 0 {
		return res // no class of ours: nothing is ours, and no index to build
	}
	idx := newIndex(snap)
	gws := map[model.ObjectRef]*parsedGateway{}
	var order []*parsedGateway
	gwQuota := translate.NewNamespaceQuota(opts.MaxGatewaysPerNamespace)
	for _, gw := range oldestObjects(snap.Gateways) {
		if !classes[string(gw.Spec.GatewayClassName)] {
			continue
		}
		ref := model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}
		res.Ours[ref] = true
		p := parseGateway(gw, idx, opts, &res.Problems)
		if p.refusal == "" {
			// Only a Gateway that would be served counts: one refused
			// for its spec takes no addresses.
			if gwQuota.Full(gw.Namespace) {
				refuseGatewayOverQuota(p, opts, &res.Problems)
			} else {
				gwQuota.Take(gw.Namespace)
			}
		}
		gws[ref] = p
		order = append(order, p)
	}
	ns := namespaceLabels(snap.Namespaces)
	// ListenerSets before routes: their listeners are the Gateways'
	// once accepted, and routes attach to them through gws.
	sets := attachListenerSets(snap.ListenerSets, gws, ns, idx, &res.Problems)
	attachHTTPRoutes(routeObjects(snap), gws, ns, idx, opts, st, &res.Problems)
	attachUDPRoutes(snap.UDPRoutes, gws, ns, idx, opts, st, &res.Problems)
	// TCPRoutes take TCP listeners only, which no HTTPRoute or GRPCRoute
	// shares; a listener serves one, so they count against no route cap.
	attachTCPRoutes(snap.TCPRoutes, gws, ns, idx, opts, st, &res.Problems)
	// TLSRoutes take TLS listeners only, likewise; their hostnames are
	// SNIs, chosen between before any HTTP is read.
	attachTLSRoutes(snap.TLSRoutes, gws, ns, idx, opts, st, &res.Problems)
	idx.tls.status(opts, st)
	for _, s := range sets {
		st.ListenerSets[s.ref] = s.status()
	}
	for _, p := range order {
		st.Gateways[p.ref] = p.status()
		st.AttachedListenerSets[p.ref] = p.attachedSets
		if lb := p.loadBalancer(opts.HealthChecks); lb != nil {
			res.LoadBalancers = append(res.LoadBalancers, lb)
			res.Accepted[p.ref] = lb.UUID
			st.Infrastructure[p.ref] = p.infrastructure()
			if p.address.notUsable != "" {
				res.AddressRefused[lb.UUID] = true
			}
		}
	}
	sort.Slice(res.LoadBalancers, func(i, j int) bool { return res.LoadBalancers[i].UUID < res.LoadBalancers[j].UUID })
	translate.SortProblems(res.Problems)
	return res
}

// attachHTTPRoutes attaches the HTTPRoutes and GRPCRoutes (routeObjects'
// order) that name a Gateway of ours, within the per-namespace and the
// global route caps: a route past one is refused with its reason.
func attachHTTPRoutes(routes []routeObject, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) {
	served := 0
	routeQuota := translate.NewNamespaceQuota(opts.MaxHTTPRoutesPerNamespace)
	for _, ro := range routes {
		r := ro.r
		if !namesOurGateway(r, gws) {
			continue
		}
		// GRPCRoutes count with the HTTPRoutes, under the same flags.
		what := "HTTPRoutes"
		if ro.kind == model.KindGRPCRoute {
			what = "routes (HTTPRoutes and GRPCRoutes)"
		}
		// The namespace's quota first, as for Ingresses: what it refuses
		// leaves the global cap to the others.
		if routeQuota.Full(r.Namespace) {
			refuseRoute(ro, gws, opts, st, problems, translate.ReasonQuotaExceeded, fmt.Sprintf(
				"namespace %s already has %d %s served, the most one namespace may have (--max-httproutes-per-namespace): the newest past it are refused",
				r.Namespace, opts.MaxHTTPRoutesPerNamespace, what))
			continue
		}
		if opts.MaxHTTPRoutes > 0 && served >= opts.MaxHTTPRoutes {
			refuseRoute(ro, gws, opts, st, problems, reasonTooManyHTTPRoutes,
				fmt.Sprintf("pier serves at most %d %s (--max-httproutes)", opts.MaxHTTPRoutes, what))
			continue
		}
		served++
		routeQuota.Take(r.Namespace)
		attachRoute(ro, gws, ns, x, opts, st, problems)
	}
}

// gatewayClasses returns the names of our accepted classes and records
// each one's conditions. pier takes no parameters: a class that points
// at some is not accepted, so its Gateways are not served.
func gatewayClasses(in []*gwv1.GatewayClass, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) map[string]bool {
	ours := map[string]bool{}
	for _, c := range in {
		if string(c.Spec.ControllerName) != opts.GatewayControllerName {
			continue
		}
		if c.Spec.ParametersRef != nil {
			st.Classes[c.Name] = []metav1.Condition{condition(c.Generation,
				string(gwv1.GatewayClassConditionStatusAccepted), false,
				string(gwv1.GatewayClassReasonInvalidParameters), "pier takes no parameters")}
			*problems = append(*problems, model.Problem{Kind: model.KindGatewayClass, Name: c.Name,
				Severity: model.SeverityError, Reason: "InvalidParameters", Field: "spec.parametersRef",
				Message: "pier takes no parameters: the class is not accepted"})
			continue
		}
		ours[c.Name] = true
		st.Classes[c.Name] = []metav1.Condition{condition(c.Generation,
			string(gwv1.GatewayClassConditionStatusAccepted), true,
			string(gwv1.GatewayClassReasonAccepted), "accepted by pier")}
	}
	return ours
}

// condition builds a condition without LastTransitionTime: the writer
// keeps the previous time when the status did not change (translation
// reads no clock).
func condition(generation int64, typ string, ok bool, reason, message string) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: generation}
}

// oldestObjects orders objects by creation time, then namespace/name: the
// Gateway API's tie-break for conflicts and route precedence.
func oldestObjects[T metav1.Object](in []T) []T {
	out := append([]T(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return olderObject(out[i], out[j]) })
	return out
}

func olderObject(a, b metav1.Object) bool {
	ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
	if !ta.Equal(tb) {
		return ta.Before(tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}

func namespaceLabels(in []*corev1.Namespace) map[string]map[string]string {
	out := make(map[string]map[string]string, len(in))
	for _, n := range in {
		out[n.Name] = n.Labels
	}
	return out
}
