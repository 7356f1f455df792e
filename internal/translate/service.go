package translate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// NativeClass is the spec.loadBalancerClass of the Services pier serves
// with the native provider.
const NativeClass = "pier.dev/native"

// Services translates the Services of type LoadBalancer that are ours
// into load balancers of the native provider (the seed's ECMP load
// balancer): one listener per Service port, one pool of ready endpoints
// per port, addresses left to IPAM. A Service is ours when its
// loadBalancerClass is NativeClass, or, with opts.TakeClasslessServices,
// when it names none (MetalLB's default). Services of another class are
// another controller's: they are not looked at, not even to complain.
//
// A Service pier cannot serve as asked is refused whole with a problem
// (an Error: a Warning Event in Kubernetes mode) and disturbs nothing
// else:
//
//   - a port 0 or out of range, a protocol other than TCP and UDP, two
//     ports with the same protocol and number;
//   - externalTrafficPolicy Local: the node masquerades so that replies
//     come back through it, which hides the client address that Local
//     promises to keep;
//   - loadBalancerSourceRanges: not enforced, and serving without the
//     filter the user asked for would open what they meant to close;
//   - an IPv6-only Service: the native provider is IPv4 only;
//   - spec.loadBalancerIP or pier.dev/external-ip not an IP, or both
//     set to different addresses. An address outside every pool is
//     refused by IPAM, as for Ingress.
//
// sessionAffinity ClientIP pins a client address to an endpoint with a
// hash of the source address (while the endpoints do not change;
// timeoutSeconds is not used). allocateLoadBalancerNodePorts is accepted
// and has no effect: traffic enters on the VIP and FIP, never a node port.
func Services(snap *source.Snapshot, opts Options) *Result {
	res := &Result{Accepted: map[model.ObjectRef]string{}, Ours: map[model.ObjectRef]bool{}}
	idx := newIndex(snap)
	svcs := append([]*corev1.Service(nil), snap.Services...)
	sort.Slice(svcs, func(i, j int) bool {
		if svcs[i].Namespace != svcs[j].Namespace {
			return svcs[i].Namespace < svcs[j].Namespace
		}
		return svcs[i].Name < svcs[j].Name
	})
	for _, svc := range svcs {
		if !ownsService(svc, opts) {
			continue
		}
		ref := model.ObjectRef{Kind: model.KindService, Namespace: svc.Namespace, Name: svc.Name}
		res.Ours[ref] = true
		lb, problems := serviceLB(svc, idx, opts)
		res.Problems = append(res.Problems, problems...)
		if lb == nil {
			continue
		}
		res.LoadBalancers = append(res.LoadBalancers, lb)
		res.Accepted[ref] = lb.UUID
	}
	sort.Slice(res.LoadBalancers, func(i, j int) bool { return res.LoadBalancers[i].UUID < res.LoadBalancers[j].UUID })
	sortProblems(res.Problems)
	return res
}

// Merge adds o (the Services' result) to r (the Ingresses'): one result
// for the store, the status pass and the problem book. Refs carry their
// kind, so an Ingress and a Service of one name never collide.
func (r *Result) Merge(o *Result) {
	r.LoadBalancers = append(r.LoadBalancers, o.LoadBalancers...)
	sort.Slice(r.LoadBalancers, func(i, j int) bool { return r.LoadBalancers[i].UUID < r.LoadBalancers[j].UUID })
	r.Problems = append(r.Problems, o.Problems...)
	sortProblems(r.Problems)
	for k, v := range o.Accepted {
		r.Accepted[k] = v
	}
	for k, v := range o.Ours {
		r.Ours[k] = v
	}
	if o.Gateway != nil {
		r.Gateway = o.Gateway
	}
	for k, v := range o.AddressRefused {
		if r.AddressRefused == nil {
			r.AddressRefused = map[string]bool{}
		}
		r.AddressRefused[k] = v
	}
}

func ownsService(svc *corev1.Service, opts Options) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if c := svc.Spec.LoadBalancerClass; c != nil {
		return *c == NativeClass
	}
	return opts.TakeClasslessServices
}

// serviceLB builds the load balancer of one Service, or refuses it.
func serviceLB(svc *corev1.Service, idx *index, opts Options) (*model.LoadBalancer, []model.Problem) {
	if p := checkServiceSpec(svc); p != nil {
		return nil, []model.Problem{*p}
	}
	pin, p := requestedIP(svc, opts)
	if p != nil {
		return nil, []model.Problem{*p}
	}
	uuid := string(svc.UID)
	if uuid == "" {
		uuid = nameUUID("service", svc.Namespace, svc.Name)
	}
	lb := &model.LoadBalancer{UUID: uuid, Name: svc.Namespace + "/" + svc.Name, Provider: model.ProviderNative,
		RequestedFIP: pin, CreatedAt: svc.CreationTimestamp.Time,
		Sources: []model.Source{{Kind: model.KindService, Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)}}}
	algorithm := model.AlgorithmRoundRobin
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		algorithm = model.AlgorithmSourceIP
	}
	seen := map[string]int{}
	var problems []model.Problem
	for i, sp := range svc.Spec.Ports {
		proto, field := protocolOf(sp), "spec.ports["+strconv.Itoa(i)+"]"
		key := string(proto) + "/" + strconv.Itoa(int(sp.Port))
		if first, dup := seen[key]; dup {
			return nil, []model.Problem{svcRefusal(svc, "DuplicatePort", field,
				"port %d/%s is also spec.ports[%d]", sp.Port, proto, first)}
		}
		seen[key] = i
		portKey := strings.ToLower(string(proto)) + "-" + strconv.Itoa(int(sp.Port))
		members, refused := idx.serviceMembers(svc, sp, opts.Members)
		if len(refused) > 0 {
			p := svcRefusal(svc, "EndpointRefused", field, "%s; not used as members", joinRefusals(refused))
			p.Severity = model.SeverityWarning
			problems = append(problems, p)
		}
		pool := model.Pool{ID: model.ID("pool", svc.Namespace, svc.Name, portKey),
			Name:      svc.Namespace + "_" + svc.Name + "_" + portKey,
			Namespace: svc.Namespace, Service: svc.Name, Port: strconv.Itoa(int(sp.Port)),
			Algorithm: algorithm, Members: members}
		lb.Pools = append(lb.Pools, pool)
		lb.Listeners = append(lb.Listeners, model.Listener{Name: portKey, Protocol: proto, Port: int(sp.Port), DefaultPoolID: pool.ID})
	}
	return lb, problems
}

// checkServiceSpec refuses what the native provider cannot do as asked.
func checkServiceSpec(svc *corev1.Service) *model.Problem {
	if len(svc.Spec.Ports) == 0 {
		return ptr(svcRefusal(svc, "NoPorts", "spec.ports", "a Service of type LoadBalancer needs at least one port"))
	}
	for i, sp := range svc.Spec.Ports {
		field := "spec.ports[" + strconv.Itoa(i) + "]"
		if sp.Port < 1 || sp.Port > 65535 {
			return ptr(svcRefusal(svc, "InvalidPort", field+".port", "port %d is out of range 1-65535", sp.Port))
		}
		if p := protocolOf(sp); p != model.ProtocolTCP && p != model.ProtocolUDP {
			return ptr(svcRefusal(svc, "UnsupportedProtocol", field+".protocol",
				"protocol %s: the native provider serves TCP and UDP", annotation.QuoteForMessage(string(sp.Protocol))))
		}
	}
	switch {
	case svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal:
		return ptr(svcRefusal(svc, "UnsupportedTrafficPolicy", "spec.externalTrafficPolicy",
			"externalTrafficPolicy Local is not supported: pier's node masquerades connections so replies return through it, which hides the client address Local keeps; use Cluster"))
	case len(svc.Spec.LoadBalancerSourceRanges) > 0:
		return ptr(svcRefusal(svc, "UnsupportedSourceRanges", "spec.loadBalancerSourceRanges",
			"loadBalancerSourceRanges is not enforced by the native provider; refusing rather than serving unfiltered"))
	case len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol:
		return ptr(svcRefusal(svc, "UnsupportedIPFamily", "spec.ipFamilies",
			"the native provider serves IPv4 only"))
	}
	return nil
}

// requestedIP is the address the Service pins, from spec.loadBalancerIP
// or the pier.dev/external-ip annotation; IPAM grants it or refuses.
func requestedIP(svc *corev1.Service, opts Options) (string, *model.Problem) {
	var pin string
	for _, c := range []struct{ field, value string }{
		{"spec.loadBalancerIP", svc.Spec.LoadBalancerIP},
		{fieldForAnnotation(annotation.ExternalIP), svc.Annotations[annotation.ExternalIP]},
	} {
		if c.value == "" {
			continue
		}
		ip, err := encode.IP(c.value)
		if err != nil || !ip.Is4() {
			return "", ptr(svcRefusal(svc, "InvalidExternalIP", c.field, "%s is not an IPv4 address", annotation.QuoteForMessage(c.value)))
		}
		if pin != "" && pin != ip.String() {
			return "", ptr(svcRefusal(svc, "ExternalIPConflict", c.field,
				"spec.loadBalancerIP and %s name different addresses", annotation.ExternalIP))
		}
		pin = ip.String()
	}
	if pin != "" && !opts.mayPin(svc.Namespace) {
		return "", ptr(svcRefusal(svc, "ExternalIPNotAllowed", "spec.loadBalancerIP",
			"namespace %s may not pin external IPs (--external-ip-namespaces)", svc.Namespace))
	}
	return pin, nil
}

func protocolOf(sp corev1.ServicePort) model.Protocol {
	switch sp.Protocol {
	case "", corev1.ProtocolTCP:
		return model.ProtocolTCP
	case corev1.ProtocolUDP:
		return model.ProtocolUDP
	}
	return model.Protocol(sp.Protocol)
}

// serviceMembers are the ready IPv4 endpoints of a Service port. The
// EndpointSlice port named like the Service port, of the same protocol,
// carries the resolved targetPort (a named targetPort included: the
// endpoint controller resolved it per pod). As for Ingress, serving but
// terminating endpoints are used when none is ready. Endpoints the policy
// refuses (members.go) are left out and described in refused.
func (x *index) serviceMembers(svc *corev1.Service, sp corev1.ServicePort, policy MemberPolicy) (members []model.Member, refused []string) {
	return x.readyMembers(svc, true, policy, func(es *discoveryv1.EndpointSlice) int { return slicePortOf(es, sp.Name, protocolOf(sp)) })
}

func slicePortOf(es *discoveryv1.EndpointSlice, name string, proto model.Protocol) int {
	for _, p := range es.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		pp := model.ProtocolTCP
		if p.Protocol != nil {
			pp = protocolOf(corev1.ServicePort{Protocol: *p.Protocol})
		}
		if pn == name && pp == proto && p.Port != nil && *p.Port > 0 && *p.Port <= 65535 {
			return int(*p.Port)
		}
	}
	return 0
}

func svcRefusal(svc *corev1.Service, reason, field, format string, args ...any) model.Problem {
	return model.Problem{Kind: model.KindService, Namespace: svc.Namespace, Name: svc.Name,
		Severity: model.SeverityError, Reason: reason, Field: field, Message: fmt.Sprintf(format, args...)}
}

func ptr[T any](v T) *T { return &v }
