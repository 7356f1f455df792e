package gatewayapi

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// backendResult is a rule's pool (nil when every backendRef fails to
// resolve: the rule answers 500) and, when some backendRef does not
// resolve, the ResolvedRefs reason and message of the first that fails.
type backendResult struct {
	pool               *model.Pool
	unresolved, detail string
	// mixedProtocols: the rule's Services are one pool but not all of
	// their ports say h2c, and one pool speaks one protocol: HTTP/1.1.
	mixedProtocols bool
	// split, when backendRefs carry filters and there are several (or
	// some fail), chooses among pools, each ref's own: the first is pool.
	split *model.Split
	pools []*model.Pool
	// policies are the BackendTLSPolicies targeting the rule's
	// resolved Services (for their status ancestors).
	policies []model.ObjectRef
}

// maxRefWeight is the largest backendRef weight (the CRD's maximum).
const maxRefWeight = 1000000

// maxFailTotal bounds a pool's FailTotal (render's rand range).
const maxFailTotal = 1 << 30

// weighted is one resolved backendRef.
type weighted struct {
	ns      string // the Service's namespace
	svc     string
	port    int
	weight  int32
	members []model.Member
	filters refFilters // the ref's own
	// h2c: the Service port's appProtocol is kubernetes.io/h2c, so its
	// members speak HTTP/2 in clear with prior knowledge.
	h2c bool
	// tls is the BackendTLSPolicy applying to the Service port (nil
	// without); policies every one targeting it.
	tls      *backendTLSPolicy
	policies []model.ObjectRef
}

// appProtocolH2C is the Service port appProtocol (a Kubernetes standard
// name) for HTTP/2 in clear with prior knowledge.
const appProtocolH2C = "kubernetes.io/h2c"

// rulePool resolves a rule's backendRefs to one pool. The spec wants 500
// for the requests a ref that does not resolve would have had: when every
// weighted ref fails, the pool is nil and the rule answers 500
// (FIXED_RESPONSE); when some do, the pool answers 500 for their share of
// the weights (Pool.FailWeight of FailTotal). A rule whose refs all weigh
// 0 gets an empty pool, which HAProxy answers with 503; a rule without
// refs gets 500 from its caller unless a RequestRedirect answers it.
//
// refFilters (nil, or one per ref) are the refs' filters: a ref with
// some gets a pool of its own, and a rule of several refs a split of
// pools rather than one pool of all their members.
func (x *index) rulePool(kind string, r *gwv1.HTTPRoute, rule int, refs []gwv1.HTTPBackendRef, refFilters []refFilters, opts translate.Options) backendResult {
	var res backendResult
	var ok []weighted
	var fail, total int64
	for i, ref := range refs {
		w, reason, msg := x.resolveBackend(kind, r.Namespace, ref.BackendRef, opts)
		if reason != "" {
			if res.unresolved == "" {
				res.unresolved, res.detail = reason, fmt.Sprintf("spec.rules[%d].backendRefs[%d]: %s", rule, i, msg)
			}
			if w.weight > 0 && w.weight <= maxRefWeight {
				fail, total = fail+int64(w.weight), total+int64(w.weight)
			}
			continue
		}
		if refFilters != nil {
			w.filters = refFilters[i]
		}
		for _, p := range w.policies {
			if !slices.Contains(res.policies, p) {
				res.policies = append(res.policies, p)
			}
		}
		if w.weight > 0 {
			ok = append(ok, w)
			total += int64(w.weight)
		}
	}
	if fail > 0 && fail == total {
		return res
	}
	if anyFilters(ok) && (len(ok) > 1 || fail > 0) {
		res.split, res.pools = splitOfWeighted(ok, int(fail)) // at most 16 refs: no overflow
		res.pool = res.pools[0]
		return res
	}
	for total > maxFailTotal { // thousands of refs: keep the ratio
		fail, total = (fail+1)/2, (total+1)/2
	}
	res.pool = poolOfWeighted(r, rule, ok, int(fail), int(total))
	h2c := 0
	for _, w := range ok {
		if w.h2c {
			h2c++
		}
	}
	res.mixedProtocols = h2c > 0 && h2c < len(ok)
	return res
}

// resolveBackend checks one backendRef: a core Service of the route's
// namespace, or of another one whose ReferenceGrant lets HTTPRoutes of
// the route's namespace refer to it, with a port it has.
func (x *index) resolveBackend(kind, routeNS string, ref gwv1.BackendRef, opts translate.Options) (weighted, string, string) {
	w := weighted{weight: 1, ns: routeNS}
	if ref.Weight != nil {
		w.weight = *ref.Weight
	}
	if w.weight < 0 || w.weight > 1000000 {
		return w, string(gwv1.RouteReasonUnsupportedValue), fmt.Sprintf("weight %d is outside 0-1000000", w.weight)
	}
	if (ref.Group != nil && *ref.Group != "") || (ref.Kind != nil && *ref.Kind != "Service") {
		return w, string(gwv1.RouteReasonInvalidKind), "only core Services are supported as backends"
	}
	if ref.Namespace != nil {
		w.ns = string(*ref.Namespace)
		if errs := validation.IsDNS1123Label(w.ns); len(errs) > 0 {
			return w, string(gwv1.RouteReasonBackendNotFound), "invalid namespace " + translate.Quote(w.ns)
		}
	}
	w.svc = string(ref.Name)
	if errs := validation.IsDNS1035Label(w.svc); len(errs) > 0 {
		return w, string(gwv1.RouteReasonBackendNotFound), "invalid service name " + translate.Quote(w.svc)
	}
	if !x.grants.permits(kind, routeNS, "Service", w.ns, w.svc) {
		return w, string(gwv1.RouteReasonRefNotPermitted),
			fmt.Sprintf("service %s/%s is in another namespace and no ReferenceGrant there permits %ss of %s", w.ns, w.svc, kind, routeNS)
	}
	ns := w.ns
	if ref.Port == nil || *ref.Port < 1 || *ref.Port > 65535 {
		return w, string(gwv1.RouteReasonBackendNotFound), "a Service backend needs a port (1-65535)"
	}
	w.port = int(*ref.Port)
	svc := x.Service(ns, w.svc)
	if svc == nil {
		return w, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s not found", ns, w.svc)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return w, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s is of type ExternalName, which pier does not proxy to", ns, w.svc)
	}
	sp := translate.ServicePort(svc, networkingv1.ServiceBackendPort{Number: int32(w.port)})
	if sp == nil {
		return w, string(gwv1.RouteReasonBackendNotFound), fmt.Sprintf("service %s/%s has no TCP port %d", ns, w.svc, w.port)
	}
	w.h2c = sp.AppProtocol != nil && *sp.AppProtocol == appProtocolH2C
	var all []*backendTLSPolicy
	w.tls, all = x.tls.forPort(ns, w.svc, sp.Name)
	for _, p := range all {
		w.policies = append(w.policies, p.ref)
	}
	// Refused endpoints (loopback, link-local, pier's pools) are left
	// out as for an Ingress.
	if opts.MembersFromClusterIP {
		w.members, _ = translate.ClusterIPMembers(svc, sp, opts.Members)
	} else {
		w.members, _ = x.EndpointMembers(svc, sp, opts.Members)
	}
	return w, "", ""
}

// poolOfWeighted builds the rule's pool. One Service is the same pool an
// Ingress would use (same ID, so routes share it); several make one pool
// of all their members, each weighted so that every Service gets its
// share of requests whatever its number of endpoints. A fail share
// (unresolved refs) makes a pool of its own, even for one Service, so
// that no other route's requests to that Service get its 500s.
func poolOfWeighted(r *gwv1.HTTPRoute, rule int, ws []weighted, fail, total int) *model.Pool {
	pool := &model.Pool{Namespace: r.Namespace, Algorithm: model.AlgorithmRoundRobin}
	n := len(ws)
	if fail > 0 {
		n = 2 // the split's shape
	}
	switch n {
	case 0:
		pool.ID = model.ID("gateway-unresolved", r.Namespace, r.Name, strconv.Itoa(rule))
		pool.Name = r.Namespace + "_unresolved_" + pool.ID[:8]
		return pool
	case 1:
		// The Service's namespace, which a ReferenceGrant may make
		// another than the route's: the same pool as its own routes'
		// (one of its own with the ref's header changes).
		return servicePool(ws[0])
	}
	parts := make([]string, 0, len(ws))
	var svcs, ports []string
	for _, w := range ws {
		name := w.svc
		if w.ns != r.Namespace { // same-namespace IDs stay what they were
			name = w.ns + "/" + w.svc
		}
		parts = append(parts, fmt.Sprintf("%s:%d:%d", name, w.port, w.weight))
		svcs, ports = append(svcs, w.svc), append(ports, strconv.Itoa(w.port))
	}
	if fail > 0 {
		parts = append(parts, fmt.Sprintf("unresolved:%d:%d", fail, total))
		pool.FailWeight, pool.FailTotal = fail, total
	}
	pool.ID = model.ID(append([]string{"gateway-split", r.Namespace}, parts...)...)
	pool.Name = r.Namespace + "_split_" + pool.ID[:8]
	pool.Service, pool.Port = strings.Join(svcs, "+"), strings.Join(ports, "+")
	pool.Members = splitMembers(ws)
	if !slices.ContainsFunc(ws, func(w weighted) bool { return !w.h2c }) {
		pool = h2cPool(pool)
	}
	// One pool speaks one TLS: the policy applies when every Service of
	// the rule has the same one; otherwise the one of the first that
	// has a policy, so that no Service under a policy is reached
	// unverified.
	for _, w := range ws {
		if w.tls != nil {
			return withBackendTLS(pool, w.tls)
		}
	}
	return pool
}

// maxServerWeight is HAProxy 2.6's largest server weight.
const maxServerWeight = 256

// splitMembers gives each member of Service i the weight
// weight_i / members_i, scaled so the largest is 256 and none is below 1
// (the rounding costs a share at most 1/256 of the largest member's). An
// endpoint that two Services share keeps one of its weights.
func splitMembers(ws []weighted) []model.Member {
	largest := 0.0
	for _, w := range ws {
		if n := len(w.members); n > 0 {
			largest = math.Max(largest, float64(w.weight)/float64(n))
		}
	}
	var out []model.Member
	for _, w := range ws {
		if len(w.members) == 0 {
			continue
		}
		share := float64(w.weight) / float64(len(w.members)) / largest
		weight := max(1, int(math.Round(share*maxServerWeight)))
		for _, m := range w.members {
			m.Weight = weight
			out = append(out, m)
		}
	}
	return translate.SortMembers(out)
}
