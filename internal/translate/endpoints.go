package translate

import (
	"iter"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// An endpoint change (a rollout, a scale, a pod going unready) is the most
// frequent change and the one that must be served soonest. Translation
// reads EndpointSlices in one place only, the members of a Service's pool,
// so when nothing but the slices of some Services changed, the previous
// result stays right except for those pools: EndpointMembers recomputes
// them instead of translating every Ingress again (32 ms at 1,000).

// EndpointMembers returns what the merged translation of snap (Ingresses,
// Services and Gateways, as Merge joins them) would be, given prev, the
// merged translation of a snapshot that differed from snap only in the
// EndpointSlices of the Services named in changed ("namespace/name"):
// prev with the members of every Ingress pool of those Services taken
// from snap. Load balancers it does not touch are prev's own pointers;
// patched lists the ones it copied, in res's order. res shares prev's
// Accepted, Ours, Problems and Gateway status: a caller that changes one
// copies it first (Result.Without, for what the reconciler refused). prev itself
// is left as it was.
//
// pools, if not nil, is IndexPools(prev): only the load balancers it
// names are looked at, instead of every pool of every load balancer (at
// 3,000 Ingresses the pass over them all was the larger part of the
// patch). The same index holds for res, whose load balancers keep their
// places and pools. objects, if it indexes snap (IndexEndpoints), finds
// the changed Services and their slices without a pass over all of them.
//
// ok is false when the result could differ from a full translation in
// more than members, and the caller must translate everything: a changed
// Service is of type LoadBalancer (the native provider reads its
// endpoints), an HTTPRoute names it (its weighted pools are built
// otherwise), a load balancer that is not an Ingress's has a pool of it,
// or one of its endpoints is one the member policy refuses (the Ingress's
// warning would change).
func EndpointMembers(prev *Result, pools PoolIndex, objects *EndpointIndex, snap *source.Snapshot, changed map[string]bool, opts Options) (res *Result, patched []*model.LoadBalancer, ok bool) {
	services := newServiceSet(changed)
	if prev == nil || namedByRoute(snap, services) {
		return nil, nil, false
	}
	idx, ok := changedIndex(snap, objects, services, opts)
	if !ok {
		return nil, nil, false
	}
	res = &Result{LoadBalancers: slices.Clone(prev.LoadBalancers), Problems: prev.Problems,
		Accepted: prev.Accepted, Ours: prev.Ours, Gateway: prev.Gateway, AddressRefused: prev.AddressRefused}
	patch := func(i int) bool {
		lb := res.LoadBalancers[i]
		copied, ok := patchMembers(lb, idx, services, opts)
		if ok && copied != lb {
			res.LoadBalancers[i] = copied
			patched = append(patched, copied)
		}
		return ok
	}
	if pools == nil {
		for i := range res.LoadBalancers {
			if !patch(i) {
				return nil, nil, false
			}
		}
		return res, patched, true
	}
	for _, i := range pools.of(services) {
		if !patch(i) {
			return nil, nil, false
		}
	}
	return res, patched, true
}

// PoolIndex names, for each Service, the load balancers of a Result that
// have a pool of it: their places in its LoadBalancers, ascending.
type PoolIndex map[[2]string][]int

// IndexPools indexes the pools of every load balancer of res.
func IndexPools(res *Result) PoolIndex {
	pools := PoolIndex{}
	for i, lb := range res.LoadBalancers {
		for _, pool := range lb.Pools {
			k := [2]string{pool.Namespace, pool.Service}
			if places := pools[k]; len(places) == 0 || places[len(places)-1] != i {
				pools[k] = append(places, i)
			}
		}
	}
	return pools
}

// of returns the places of the load balancers with a pool of one of
// services, ascending, each once.
func (pools PoolIndex) of(services serviceSet) []int {
	var places []int
	for k := range services.keys() {
		places = append(places, pools[k]...)
	}
	slices.Sort(places)
	return slices.Compact(places)
}

// serviceSet is the set of changed Services, looked up for every Service,
// slice and pool of the snapshot (thousands) on every endpoint change.
// An endpoint change names one Service or a few: then a look-up compares
// strings, which costs a few nanoseconds where hashing a key cost tens.
// A burst of many is a map.
type serviceSet struct {
	few  [][2]string // namespace, name; nil when many is used
	many map[[2]string]bool
}

// fewServices is how many Services a serviceSet compares one by one.
const fewServices = 8

// newServiceSet turns a set of "namespace/name" into a serviceSet.
func newServiceSet(names map[string]bool) serviceSet {
	var s serviceSet
	if len(names) > fewServices {
		s.many = make(map[[2]string]bool, len(names))
	}
	for n := range names {
		ns, name, _ := strings.Cut(n, "/")
		if s.many != nil {
			s.many[[2]string{ns, name}] = true
		} else {
			s.few = append(s.few, [2]string{ns, name})
		}
	}
	return s
}

// keys yields each Service of the set once, (namespace, name).
func (s serviceSet) keys() iter.Seq[[2]string] {
	if s.many != nil {
		return maps.Keys(s.many)
	}
	return slices.Values(s.few)
}

func (s serviceSet) has(namespace, name string) bool {
	if s.many != nil {
		return s.many[[2]string{namespace, name}]
	}
	for _, k := range s.few {
		if k[1] == name && k[0] == namespace {
			return true
		}
	}
	return false
}

// changedIndex is the translation index of the changed Services only:
// all patchMembers looks up, without indexing every Service and slice.
// ok is false when members are not all that an endpoint change of those
// Services can alter: one is of type LoadBalancer, or one of their slices
// holds an endpoint the member policy refuses (on any port of the slice:
// more than translation would look at, which errs on the side of a full
// translation). objects, if it indexes snap, gives those Services and
// slices; else one pass over each list of snap finds them (passOver).
func changedIndex(snap *source.Snapshot, objects *EndpointIndex, changed serviceSet, opts Options) (idx *index, ok bool) {
	part, indexed := (*source.Snapshot)(nil), false
	if objects.Of(snap) {
		part, indexed = objects.part(changed)
	}
	if !indexed {
		part = passOver(snap, changed)
	}
	for _, svc := range part.Services {
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			return nil, false
		}
	}
	for _, es := range part.EndpointSlices {
		if refusesAny(es, opts.Members) {
			return nil, false
		}
	}
	return newIndex(part), true
}

// passOver takes the Services of changed and their EndpointSlices from
// snap, in snap's order, with one pass over each list.
func passOver(snap *source.Snapshot, changed serviceSet) *source.Snapshot {
	part := &source.Snapshot{}
	for _, svc := range snap.Services {
		if changed.has(svc.Namespace, svc.Name) {
			part.Services = append(part.Services, svc)
		}
	}
	for _, es := range snap.EndpointSlices {
		if changed.has(es.Namespace, es.Labels[discoveryv1.LabelServiceName]) {
			part.EndpointSlices = append(part.EndpointSlices, es)
		}
	}
	return part
}

// namedByRoute reports whether an HTTPRoute, a GRPCRoute, a TCPRoute or a TLSRoute
// names one of the changed Services: their pools (weighted, h2c, TCP)
// are built otherwise.
func namedByRoute(snap *source.Snapshot, changed serviceSet) bool {
	names := func(routeNS string, b gwv1.BackendObjectReference) bool {
		ns := routeNS
		if b.Namespace != nil {
			ns = string(*b.Namespace)
		}
		return changed.has(ns, string(b.Name))
	}
	for _, route := range snap.HTTPRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if names(route.Namespace, b.BackendObjectReference) {
					return true
				}
			}
		}
	}
	for _, route := range snap.GRPCRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if names(route.Namespace, b.BackendObjectReference) {
					return true
				}
			}
		}
	}
	// A UDPRoute's pool (a Service's UDP port) is built otherwise too.
	for _, route := range snap.UDPRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if names(route.Namespace, b.BackendObjectReference) {
					return true
				}
			}
		}
	}
	for _, route := range snap.TCPRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if names(route.Namespace, b.BackendObjectReference) {
					return true
				}
			}
		}
	}
	for _, route := range snap.TLSRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				if names(route.Namespace, b.BackendObjectReference) {
					return true
				}
			}
		}
	}
	return false
}

// refusesAny reports whether the member policy refuses an endpoint of es
// on any of its ports.
func refusesAny(es *discoveryv1.EndpointSlice, policy MemberPolicy) bool {
	for _, p := range es.Ports {
		if p.Port == nil {
			continue
		}
		for _, ep := range es.Endpoints {
			for _, a := range ep.Addresses {
				if m, ok := member(a, int(*p.Port), nil); ok && refusedMember(policy, m) {
					return true
				}
			}
		}
	}
	return false
}

func refusedMember(policy MemberPolicy, m model.Member) bool {
	return policy.refusal(netip.MustParseAddr(m.Address), m.Port) != ""
}

// patchMembers returns lb with new members in the pools of the changed
// Services (a copy; lb itself when it has none). ok is false when lb is
// not an Ingress's and has such a pool.
func patchMembers(lb *model.LoadBalancer, idx *index, changed serviceSet, opts Options) (*model.LoadBalancer, bool) {
	var out *model.LoadBalancer
	for i, pool := range lb.Pools {
		if !changed.has(pool.Namespace, pool.Service) {
			continue
		}
		if !servesIngressesOnly(lb) {
			return nil, false
		}
		if pool.ServiceUpstream || opts.MembersFromClusterIP {
			continue // the ClusterIP, which no slice changes
		}
		if out == nil {
			c := *lb
			c.Pools = slices.Clone(lb.Pools)
			out = &c
		}
		out.Pools[i].Members = idx.poolMembers(pool, opts)
	}
	if out == nil {
		return lb, true
	}
	return out, true
}

func servesIngressesOnly(lb *model.LoadBalancer) bool {
	for _, s := range lb.Sources {
		if s.Kind != model.KindIngress {
			return false
		}
	}
	return true
}

// poolMembers are the members poolFor gives an Ingress pool of pool's
// Service and port: none when the Service, or its port, is missing or
// of type ExternalName (poolFor warns about those, and they did not
// change).
func (x *index) poolMembers(pool model.Pool, opts Options) []model.Member {
	svc := x.services[pool.Namespace+"/"+pool.Service]
	if svc == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	port, ok := backendPort(pool.Port)
	if !ok {
		return nil
	}
	sp := findServicePort(svc, port)
	if sp == nil {
		return nil
	}
	members, _ := x.endpointMembers(svc, sp, opts.Members)
	return members
}

// backendPort turns a pool's Port back into the Ingress's port:
// servicePortKey writes a name (which has a letter) or a number. ok is
// false for a number out of range, which poolFor gives no members.
func backendPort(key string) (networkingv1.ServiceBackendPort, bool) {
	if n, err := strconv.Atoi(key); err == nil {
		return networkingv1.ServiceBackendPort{Number: int32(n)}, n > 0 && n <= 65535
	}
	return networkingv1.ServiceBackendPort{Name: key}, key != ""
}
