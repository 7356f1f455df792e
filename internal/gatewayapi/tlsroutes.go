package gatewayapi

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// A TLSRoute passes the TLS connections of the TLS listeners it attaches
// to, chosen by the SNI of their ClientHello, to its backendRefs (render:
// the SNI frontend of model.Listener.Passthrough, in front of the port's
// HTTPS termination): whole and still encrypted from a listener in
// tls.mode Passthrough; decrypted, with the listener's certificates, from
// one in tls.mode Terminate (model.PassthroughRoute.Decrypt: the plain
// bytes go to the backends). Listeners of both modes may share a port
// with different hostnames (the spec's mixed termination). So:
//
//   - its hostnames are intersected with the listener's hostname as an
//     HTTPRoute's are (exact names and "*.example.com" wildcards over any
//     number of labels); none in common: NoMatchingListenerHostname;
//   - it has one rule (a connection carries nothing else to choose by):
//     more is refused, UnsupportedValue;
//   - its backendRefs are resolved as a TCPRoute's, into one TCP pool,
//     with the share of refs that do not resolve refused;
//   - two routes with the same hostname on a listener: the older serves
//     it (routes attach oldest first, and the first SNI entry is kept);
//   - a TLS listener's SNIs no route serves are refused, never handed to
//     an HTTPS listener on the same port, and an HTTPS listener's
//     hostname is terminated even where a TLS listener's wildcard or
//     catch-all also matches it: a connection belongs to the most
//     specific listener whose hostname matches its SNI (isolation.go).

// reasonUnsupportedValue refuses a listener asking for what pier does
// not do (the spec's listener reason; v1.4.1's module has no constant).
const reasonUnsupportedValue gwv1.ListenerConditionReason = "UnsupportedValue"

var routeKindTLS = gwv1.RouteGroupKind{Group: ptrTo(gwv1.Group(gwv1.GroupName)), Kind: model.KindTLSRoute}

// tlsRoute is a TLSRoute parsed once for all its parentRefs.
type tlsRoute struct {
	r       *gwv1alpha2.TLSRoute
	hosts   []string
	refusal *routeRefusal
	backend backendResult
	counted map[*gwListener]bool
}

// tlsAttachment is a TLSRoute on one TLS listener: the hostnames it
// serves there (the intersection; "" for every SNI).
type tlsAttachment struct {
	route *tlsRoute
	hosts []string
}

// attachTLSRoutes attaches every TLSRoute naming a Gateway of ours,
// oldest first, and records its parents' status.
func attachTLSRoutes(routes []*gwv1alpha2.TLSRoute, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, opts translate.Options, st *translate.GatewayStatus, problems *[]model.Problem) {
	attachL4Routes(routes, model.KindTLSRoute, func(r *gwv1alpha2.TLSRoute) []gwv1.ParentReference { return r.Spec.ParentRefs },
		func(r *gwv1alpha2.TLSRoute) *tlsRoute { return parseTLSRoute(r, x, opts, problems) },
		func(p *parsedGateway, tr *tlsRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
			accepted, reason, msg := p.attachTLS(tr, parent, nsLabels)
			if accepted && p.terminates(tr) {
				x.tls.reached(p.ref, tr.backend.policies) // its pool speaks TLS under them: their status names this Gateway
			}
			return accepted, reason, msg
		}, gws, ns, opts, st)
}

// terminates reports whether tr is on one of p's TLS listeners that
// terminate, where a BackendTLSPolicy of its Services applies.
func (p *parsedGateway) terminates(tr *tlsRoute) bool {
	for _, l := range p.listeners {
		if !l.tlsTerminate {
			continue
		}
		for _, a := range l.tlsRoutes {
			if a.route == tr {
				return true
			}
		}
	}
	return false
}

// parseTLSRoute checks the hostnames and the rule and resolves its
// backendRefs to a TCP pool (nil: connections are refused).
func parseTLSRoute(r *gwv1alpha2.TLSRoute, x *index, opts translate.Options, problems *[]model.Problem) *tlsRoute {
	tr := &tlsRoute{r: r, counted: map[*gwListener]bool{}}
	problem := func(sev model.Severity, reason, field, msg string) {
		*problems = append(*problems, model.Problem{Kind: model.KindTLSRoute, Namespace: r.Namespace, Name: r.Name,
			Severity: sev, Reason: reason, Field: field, Message: msg})
	}
	refuse := func(field, msg string) *tlsRoute {
		tr.refusal = &routeRefusal{field, msg}
		problem(model.SeverityError, string(gwv1.RouteReasonUnsupportedValue), field, msg+": the route is not served")
		return tr
	}
	for i, h := range r.Spec.Hostnames {
		if _, err := translate.CheckHost(string(h)); err != nil || h == "" {
			return refuse(fmt.Sprintf("spec.hostnames[%d]", i), fmt.Sprintf("hostname %s: %v", translate.Quote(string(h)), err))
		}
		tr.hosts = append(tr.hosts, string(h))
	}
	if n := len(r.Spec.Rules); n != 1 {
		return refuse("spec.rules", fmt.Sprintf(
			"%d rules: pier serves a TLSRoute of one rule (a connection carries nothing but its SNI to choose by)", n))
	}
	refs := make([]gwv1.HTTPBackendRef, 0, len(r.Spec.Rules[0].BackendRefs))
	for _, ref := range r.Spec.Rules[0].BackendRefs {
		refs = append(refs, gwv1.HTTPBackendRef{BackendRef: ref})
	}
	tr.backend = x.rulePool(model.KindTLSRoute, &gwv1.HTTPRoute{ObjectMeta: r.ObjectMeta}, 0, refs, nil, opts)
	tr.backend.pool = tcpPool(tr.backend.pool)
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

func (tr *tlsRoute) resolvedRefs() metav1.Condition {
	return resolvedRefsCondition(tr.r.Generation, tr.backend.unresolved, tr.backend.detail)
}

// attachTLS applies the attachment rules for one parentRef, as attach
// does an HTTPRoute's: sectionName and port, allowedRoutes kinds and
// namespaces (attachedRoutes counts the route where its hostnames
// intersect the listener's), then hostname intersection.
func (p *parsedGateway) attachTLS(tr *tlsRoute, parent gwv1.ParentReference, nsLabels map[string]string) (bool, string, string) {
	// A TLS listener counts only the routes whose hostnames meet its own.
	meets := func(l *gwListener) bool { return len(intersectHosts(l.host, tr.hosts)) > 0 }
	allowed, reason, msg := p.allowedL4Listeners(model.KindTLSRoute, tr.r.Namespace, parent, nsLabels, tr.counted, meets, tr.refusal,
		"no selected listener allows this route (a TLS listener whose allowedRoutes take TLSRoutes from its namespace)")
	if reason != "" {
		return false, reason, msg
	}
	matched := false
	for _, l := range allowed {
		hosts := intersectHosts(l.host, tr.hosts)
		if len(hosts) == 0 {
			continue
		}
		matched = true
		if !l.hasTLSRoute(tr) {
			l.tlsRoutes = append(l.tlsRoutes, tlsAttachment{route: tr, hosts: hosts})
		}
	}
	if !matched {
		return false, string(gwv1.RouteReasonNoMatchingListenerHostname), "no hostname of the route matches the listeners'"
	}
	return true, string(gwv1.RouteReasonAccepted), ""
}

// originalHost is the most specific of a route's own hostnames that
// stands for the intersected hostname h: h itself, else the longest of
// its wildcards covering h ("" for a route without hostnames).
func originalHost(hosts []string, h string) string {
	best := ""
	for _, o := range hosts {
		switch {
		case o == h:
			return h
		case isWildcard(o) && covers(o, h) && len(o) > len(best):
			best = o
		}
	}
	return best
}

func (l *gwListener) hasTLSRoute(tr *tlsRoute) bool {
	for _, a := range l.tlsRoutes {
		if a.route == tr {
			return true
		}
	}
	return false
}

// passthroughRoutes are the SNI routes of the port's TLS listeners
// (model.Listener.Passthrough), their pools added to the Gateway's:
//
//  1. each TLSRoute hostname on a listener that owns it (the most
//     specific listener whose hostname matches), to the route's pool
//     (decrypted first on a listener in tls.mode Terminate), or refused
//     when none of its backendRefs resolves; the older route
//     first, which keeps a hostname two routes name;
//  2. each TLS listener's own hostname ("" for a listener without),
//     refused: its SNIs no route serves reach no other listener;
//  3. each HTTPS listener's hostname a TLS listener's also matches,
//     terminated: its SNIs are the HTTPS listener's.
//
// nil when the port has no usable TLS listener.
func (p *parsedGateway) passthroughRoutes(port int) []model.PassthroughRoute {
	var out []model.PassthroughRoute
	seen := map[string]bool{}
	add := func(r model.PassthroughRoute) {
		if !seen[r.Host] {
			seen[r.Host] = true
			out = append(out, r)
		}
	}
	var tls []*gwListener
	for _, l := range p.listeners {
		if l.port == port && l.usable() && l.tlsListener() {
			tls = append(tls, l)
		}
	}
	if len(tls) == 0 {
		return nil
	}
	// Each route's hostnames on the listeners that own them; two routes
	// with one intersected hostname are decided by the hostname each
	// wrote (an exact name before a wildcard, a longer wildcard before a
	// shorter, as the spec asks), then by age (the attachment order).
	type candidate struct {
		route    model.PassthroughRoute
		original string
	}
	var candidates []candidate
	for _, l := range tls {
		for _, a := range l.tlsRoutes {
			tr := a.route
			source := model.Source{Kind: model.KindTLSRoute, Namespace: tr.r.Namespace, Name: tr.r.Name, UID: translate.ValidUID(string(tr.r.UID))}
			for _, h := range a.hosts {
				if p.ownerOf(port, h) != l {
					continue // listener isolation: a more specific listener's
				}
				r := model.PassthroughRoute{Host: h, Source: source}
				if pool := tr.backend.pool; pool != nil {
					if !l.tlsTerminate {
						pool = plainTCP(pool) // passthrough: the client's own TLS reaches the member
					}
					if _, ok := p.pools[pool.ID]; !ok {
						p.pools[pool.ID] = pool
					}
					r.PoolID, r.Decrypt = pool.ID, l.tlsTerminate
				}
				candidates = append(candidates, candidate{r, originalHost(tr.hosts, h)})
			}
		}
	}
	sort.SliceStable(candidates, func(i, j int) bool {
		return hostMoreSpecific(candidates[i].original, candidates[j].original)
	})
	for _, c := range candidates {
		add(c.route)
	}
	gateway := model.Source{Kind: model.KindGateway, Namespace: p.gw.Namespace, Name: p.gw.Name, UID: translate.ValidUID(string(p.gw.UID))}
	for _, l := range tls {
		add(model.PassthroughRoute{Host: l.host, Source: gateway})
	}
	for _, l := range p.listeners {
		if l.port != port || !l.usable() || l.tlsListener() || l.protocol != model.ProtocolTerminatedHTTPS || l.host == "" {
			continue
		}
		for _, t := range tls {
			if listenerMatches(t.host, l.host) {
				add(model.PassthroughRoute{Host: l.host, Terminate: true, Source: gateway})
				break
			}
		}
	}
	return out
}
