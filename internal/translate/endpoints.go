package translate

import (
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

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
// prev itself is left as it was.
//
// ok is false when the result could differ from a full translation in
// more than members, and the caller must translate everything: a changed
// Service is of type LoadBalancer (the native provider reads its
// endpoints), an HTTPRoute names it (its weighted pools are built
// otherwise), a load balancer that is not an Ingress's has a pool of it,
// or one of its endpoints is one the member policy refuses (the Ingress's
// warning would change).
func EndpointMembers(prev *Result, snap *source.Snapshot, changed map[string]bool, opts Options) (res *Result, ok bool) {
	services := serviceKeys(changed)
	if prev == nil || namedByRoute(snap, services) {
		return nil, false
	}
	idx, ok := changedIndex(snap, services, opts)
	if !ok {
		return nil, false
	}
	res = &Result{LoadBalancers: slices.Clone(prev.LoadBalancers), Problems: prev.Problems,
		Accepted: maps.Clone(prev.Accepted), Ours: prev.Ours, Gateway: prev.Gateway, AddressRefused: prev.AddressRefused}
	for i, lb := range res.LoadBalancers {
		patched, ok := patchMembers(lb, idx, services, opts)
		if !ok {
			return nil, false
		}
		res.LoadBalancers[i] = patched
	}
	return res, true
}

// serviceKey is a Service's namespace and name: looked up for every
// Service, slice and pool, a pair of strings, where "namespace/name" would
// be a string built each time.
type serviceKey [2]string

// serviceKeys turns a set of "namespace/name" into serviceKeys.
func serviceKeys(names map[string]bool) map[serviceKey]bool {
	out := make(map[serviceKey]bool, len(names))
	for n := range names {
		ns, name, _ := strings.Cut(n, "/")
		out[serviceKey{ns, name}] = true
	}
	return out
}

// changedIndex is the translation index of the changed Services only:
// all patchMembers looks up, without indexing every Service and slice.
// ok is false when members are not all that an endpoint change of those
// Services can alter: one is of type LoadBalancer, or one of their slices
// holds an endpoint the member policy refuses (on any port of the slice:
// more than translation would look at, which errs on the side of a full
// translation). One pass over the Services and one over the slices.
func changedIndex(snap *source.Snapshot, changed map[serviceKey]bool, opts Options) (idx *index, ok bool) {
	part := &source.Snapshot{}
	for _, svc := range snap.Services {
		if !changed[serviceKey{svc.Namespace, svc.Name}] {
			continue
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			return nil, false
		}
		part.Services = append(part.Services, svc)
	}
	for _, es := range snap.EndpointSlices {
		if !changed[serviceKey{es.Namespace, es.Labels[discoveryv1.LabelServiceName]}] {
			continue
		}
		if refusesAny(es, opts.Members) {
			return nil, false
		}
		part.EndpointSlices = append(part.EndpointSlices, es)
	}
	return newIndex(part), true
}

// namedByRoute reports whether an HTTPRoute names one of the changed
// Services: its weighted pools are built otherwise.
func namedByRoute(snap *source.Snapshot, changed map[serviceKey]bool) bool {
	for _, route := range snap.HTTPRoutes {
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				ns := route.Namespace
				if b.Namespace != nil {
					ns = string(*b.Namespace)
				}
				if changed[serviceKey{ns, string(b.Name)}] {
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
func patchMembers(lb *model.LoadBalancer, idx *index, changed map[serviceKey]bool, opts Options) (*model.LoadBalancer, bool) {
	var out *model.LoadBalancer
	for i, pool := range lb.Pools {
		if !changed[serviceKey{pool.Namespace, pool.Service}] {
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
