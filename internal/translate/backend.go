package translate

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// index answers the look-ups translation makes, so each is a map access.
type index struct {
	services map[string]*corev1.Service
	// slices by "namespace/service" (the kubernetes.io/service-name label).
	slices map[string][]*discoveryv1.EndpointSlice
	snap   *source.Snapshot
}

func newIndex(snap *source.Snapshot) *index {
	x := &index{
		services: map[string]*corev1.Service{},
		slices:   map[string][]*discoveryv1.EndpointSlice{},
		snap:     snap,
	}
	for _, s := range snap.Services {
		x.services[s.Namespace+"/"+s.Name] = s
	}
	for _, es := range snap.EndpointSlices {
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		key := es.Namespace + "/" + svc
		x.slices[key] = append(x.slices[key], es)
	}
	for _, list := range x.slices {
		sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	}
	return x
}

// poolFor resolves an Ingress service backend to a Pool with its members.
// A missing Service or port is not fatal: the pool stays empty, HAProxy
// answers 503 for that route only, and a warning says why. A malformed
// name is fatal (returned as error) because it could only come from a
// hostile or broken source.
func (x *index) poolFor(ing *networkingv1.Ingress, b *networkingv1.IngressServiceBackend,
	field string, set ingressSettings, opts Options) (*model.Pool, []model.Problem, error) {
	return x.poolIn(ing.Namespace, ing, b, field, set, opts)
}

// poolIn is poolFor with the Service in namespace ns (auth-url's Service,
// which the operator may allow in another namespace); problems are ing's.
func (x *index) poolIn(ns string, ing *networkingv1.Ingress, b *networkingv1.IngressServiceBackend,
	field string, set ingressSettings, opts Options) (*model.Pool, []model.Problem, error) {
	if errs := validation.IsDNS1035Label(b.Name); len(errs) > 0 {
		return nil, nil, fmt.Errorf("%s.name: invalid service name %s", field, annotation.QuoteForMessage(b.Name))
	}
	portKey, err := servicePortKey(b.Port)
	if errors.Is(err, errPortOutOfRange) {
		// A port no Service can have: like a missing port, only this
		// route answers 503.
		pool := &model.Pool{ID: model.ID("pool", ns, b.Name, portKey), Name: ns + "_" + b.Name + "_" + portKey,
			Namespace: ns, Service: b.Name, Port: portKey, Algorithm: set.Balance, HealthCheck: set.checks(opts)}
		set.applyTimeouts(pool)
		set.applyAffinity(pool)
		set.applyProtocol(pool)
		set.applyUpstream(pool, opts)
		return pool, []model.Problem{warning(ing, "ServicePortNotFound", field+".port",
			"%v: requests for this route get 503", err)}, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s.port: %w", field, err)
	}
	pool := &model.Pool{
		ID:          model.ID("pool", ns, b.Name, portKey),
		Name:        ns + "_" + b.Name + "_" + portKey,
		Namespace:   ns,
		Service:     b.Name,
		Port:        portKey,
		Algorithm:   set.Balance,
		HealthCheck: set.checks(opts),
	}
	set.applyTimeouts(pool)
	set.applyAffinity(pool)
	set.applyProtocol(pool)
	set.applyUpstream(pool, opts)
	svc := x.services[ns+"/"+b.Name]
	if svc == nil {
		return pool, []model.Problem{warning(ing, "ServiceNotFound", field,
			"service %s/%s not found: requests for this route get 503", ns, b.Name)}, nil
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return pool, []model.Problem{warning(ing, "UnsupportedBackend", field,
			"service %s/%s is of type ExternalName, which pier does not proxy to: requests for this route get 503",
			ns, b.Name)}, nil
	}
	sp := findServicePort(svc, b.Port)
	if sp == nil {
		return pool, []model.Problem{warning(ing, "ServicePortNotFound", field,
			"service %s/%s has no port %s: requests for this route get 503", ns, b.Name, portKey)}, nil
	}
	var refused []string
	var problems []model.Problem
	if opts.MembersFromClusterIP || pool.ServiceUpstream {
		pool.Members, refused = clusterIPMembers(svc, sp, opts.Members)
		if len(pool.Members) == 0 && len(refused) == 0 {
			problems = append(problems, warning(ing, "NoClusterIP", field,
				"service %s/%s has no ClusterIP (headless, or not allocated yet) to proxy to: requests for this route get 503",
				ing.Namespace, b.Name))
		}
	} else {
		pool.Members, refused = x.endpointMembers(svc, sp, opts.Members)
	}
	if len(refused) > 0 {
		problems = append(problems, warning(ing, "EndpointRefused", field,
			"service %s/%s: %s; not used as members", ns, b.Name, joinRefusals(refused)))
	}
	return pool, problems, nil
}

// errPortOutOfRange marks a port number no Service can have.
var errPortOutOfRange = errors.New("port number out of range 1-65535")

// servicePortKey returns the port as pools name it: the name, or the
// number in decimal. For an out-of-range number it returns the key and
// errPortOutOfRange.
func servicePortKey(p networkingv1.ServiceBackendPort) (string, error) {
	switch {
	case p.Name != "" && p.Number != 0:
		return "", fmt.Errorf("both name and number set")
	case p.Name != "":
		if errs := validation.IsValidPortName(p.Name); len(errs) > 0 {
			return "", fmt.Errorf("invalid port name %s", annotation.QuoteForMessage(p.Name))
		}
		return p.Name, nil
	case p.Number > 0 && p.Number <= 65535:
		return strconv.Itoa(int(p.Number)), nil
	}
	return strconv.Itoa(int(p.Number)), fmt.Errorf("port %d: %w", p.Number, errPortOutOfRange)
}

func findServicePort(svc *corev1.Service, p networkingv1.ServiceBackendPort) *corev1.ServicePort {
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if sp.Protocol != "" && sp.Protocol != corev1.ProtocolTCP {
			continue
		}
		if (p.Name != "" && sp.Name == p.Name) || (p.Name == "" && sp.Port == p.Number) {
			return sp
		}
	}
	return nil
}

// endpointMembers are the ready endpoints of the Service's EndpointSlices
// on the slice port named like the service port. When none is ready,
// serving-but-terminating endpoints are used rather than failing every
// request during a rollout's last moments.
// Endpoints the policy refuses are left out and described in refused.
func (x *index) endpointMembers(svc *corev1.Service, sp *corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	return x.readyMembers(svc, false, policy, func(es *discoveryv1.EndpointSlice) int { return slicePort(es, sp.Name) })
}

// readyMembers collects the members of a Service from its slices: the
// port of each slice from portOf (0: the slice does not serve it), IPv4
// slices only when v4Only, ready endpoints, else serving ones.
func (x *index) readyMembers(svc *corev1.Service, v4Only bool, policy MemberPolicy,
	portOf func(*discoveryv1.EndpointSlice) int) (members []model.Member, refused []string) {
	var ready, terminating []model.Member
	for _, es := range x.slices[svc.Namespace+"/"+svc.Name] {
		if es.AddressType != discoveryv1.AddressTypeIPv4 && (v4Only || es.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		port := portOf(es)
		if port == 0 {
			continue
		}
		for _, ep := range es.Endpoints {
			isReady := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			serving := ep.Conditions.Serving == nil || *ep.Conditions.Serving
			for _, a := range ep.Addresses {
				m, ok := member(a, port, ep.TargetRef)
				why := ""
				if ok {
					why = policy.refusal(netip.MustParseAddr(m.Address), port)
				}
				switch {
				case !ok:
				case why != "":
					refused = append(refused, net.JoinHostPort(m.Address, strconv.Itoa(port))+" is "+why)
				case isReady:
					ready = append(ready, m)
				case serving:
					terminating = append(terminating, m)
				}
			}
		}
	}
	if len(ready) == 0 {
		ready = terminating
	}
	return sortMembers(ready), refused
}

// joinRefusals describes refused endpoints, the first few by name (an
// endpoint may appear in two slices: each is named once).
func joinRefusals(refused []string) string {
	sort.Strings(refused)
	refused = slices.Compact(refused)
	const shown = 3
	if len(refused) <= shown {
		return strings.Join(refused, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(refused[:shown], "; "), len(refused)-shown)
}

func slicePort(es *discoveryv1.EndpointSlice, name string) int {
	for _, p := range es.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn != name || p.Port == nil {
			continue
		}
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if *p.Port > 0 && *p.Port <= 65535 {
			return int(*p.Port)
		}
	}
	return 0
}

// member turns one endpoint address into a Member. Addresses HAProxy
// must not dial (unspecified, multicast, zoned) are skipped: one bad
// endpoint must not make a whole load balancer unrenderable.
func member(address string, port int, ref *corev1.ObjectReference) (model.Member, bool) {
	addr, err := encode.IP(address)
	if err != nil {
		return model.Member{}, false
	}
	m := model.Member{Address: addr.String(), Port: port, Weight: 1}
	if ref != nil && ref.Kind == "Pod" {
		m.Target = ref.Name
	}
	return m, true
}

// clusterIPMembers is the Service's ClusterIP as the pool's only member
// (service-upstream, --members-from-cluster-ip). Whoever writes the
// Service chooses that address as much as an endpoint's (pier run reads
// it from the tenant's manifest; a cluster lets spec.clusterIP be
// chosen), so the endpoint policy applies to it too: a ClusterIP at
// pier's API or a VIP is refused, and described in refused.
func clusterIPMembers(svc *corev1.Service, sp *corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		return nil, nil
	}
	m, ok := member(svc.Spec.ClusterIP, int(sp.Port), nil)
	if !ok {
		return nil, nil
	}
	if why := policy.refusal(netip.MustParseAddr(m.Address), m.Port); why != "" {
		return nil, []string{"ClusterIP " + net.JoinHostPort(m.Address, strconv.Itoa(m.Port)) + " is " + why}
	}
	m.Target = "clusterIP"
	return []model.Member{m}, nil
}

// sortMembers orders by address then port and drops duplicates (the same
// endpoint may appear in two slices during a slice rebalancing).
func sortMembers(ms []model.Member) []model.Member {
	sort.Slice(ms, func(i, j int) bool {
		ai, aj := netip.MustParseAddr(ms[i].Address), netip.MustParseAddr(ms[j].Address)
		if c := ai.Compare(aj); c != 0 {
			return c < 0
		}
		return ms[i].Port < ms[j].Port
	})
	out := ms[:0]
	for i, m := range ms {
		if i > 0 && m.Address == ms[i-1].Address && m.Port == ms[i-1].Port {
			continue
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
