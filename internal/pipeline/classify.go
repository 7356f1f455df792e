package pipeline

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"pier.dev/pier/internal/source"
)

// Reasons for a rebuild, the label of pier_rebuilds_total. When one
// snapshot carries several kinds of change, the first in this order is
// counted.
const (
	ReasonInitial   = "initial"
	ReasonClass     = "class"
	ReasonIngress   = "ingress"
	ReasonGateway   = "gateway"
	ReasonService   = "service"
	ReasonEndpoints = "endpoints"
	ReasonSecret    = "secret"
	ReasonConfigMap = "configmap"
	ReasonNode      = "node"
	// ReasonLoadBalancer: someone else changed or deleted a stored load
	// balancer since the last rebuild; the next snapshot rebuilds, which
	// puts it back.
	ReasonLoadBalancer = "loadbalancer"
)

// effect is what a new snapshot calls for.
type effect struct {
	rebuild string // a Reason, or empty: no rebuild
	status  bool   // a status pass (implied by a rebuild)
	// endpoints, when the rebuild is for endpoints and nothing else
	// translation reads changed, are the Services ("namespace/name")
	// whose EndpointSlices did: only their members need translating
	// again (translate.EndpointMembers).
	endpoints nameSet
	// ingresses: the rebuild is for Ingresses and nothing else
	// translation reads changed, so only the load balancers of the
	// changed Ingresses need translating again (translate.IngressChanges).
	ingresses bool
}

// classify compares the snapshot last seen with the next one and says
// whether anything translation reads changed (Contour's cache: an object
// only matters when it is ours or referenced by what is ours). Objects that
// do not matter stay in the snapshot, so a Service that becomes referenced
// by a later Ingress change is there when that change rebuilds.
//
// refs are the Services and Secrets the Ingresses of our class referred to
// at the last rebuild; an Ingress change rebuilds anyway, so references it
// adds need not be known here.
func classify(prev, next *source.Snapshot, refs references, statusService string) effect {
	if prev == nil {
		return effect{rebuild: ReasonInitial, status: true}
	}
	var e effect
	ps, ns := source.Differing(prev.EndpointSlices, next.EndpointSlices)
	prevSlices, nextSlices := refs.slices(ps), refs.slices(ns)
	switch {
	case changed(prev.IngressClasses, next.IngressClasses, sameClass):
		e.rebuild = ReasonClass
	case changed(prev.Ingresses, next.Ingresses, sameIngressSpec):
		e.rebuild = ReasonIngress
	case gatewayAPIChanged(prev, next):
		e.rebuild = ReasonGateway
	case changedNamed(refs.services, prev.Services, next.Services, sameService),
		loadBalancerServicesChanged(prev, next):
		e.rebuild = ReasonService
	case changed(prevSlices, nextSlices, sameSlice):
		e.rebuild = ReasonEndpoints
	case changedNamed(refs.secrets, prev.Secrets, next.Secrets, sameSecret):
		e.rebuild = ReasonSecret
	case changedNamed(refs.configMaps, prev.ConfigMaps, next.ConfigMaps, sameConfigMap):
		e.rebuild = ReasonConfigMap
	case !reflect.DeepEqual(prev.Nodes, next.Nodes):
		e.rebuild = ReasonNode
	}
	if e.rebuild == ReasonEndpoints && !changedNamed(refs.secrets, prev.Secrets, next.Secrets, sameSecret) &&
		!changedNamed(refs.configMaps, prev.ConfigMaps, next.ConfigMaps, sameConfigMap) &&
		reflect.DeepEqual(prev.Nodes, next.Nodes) {
		e.endpoints = slicesServices(prevSlices, nextSlices)
	}
	if e.rebuild == ReasonIngress {
		e.ingresses = onlyIngressesChanged(prev, next, refs)
	}
	if e.rebuild != "" {
		e.status = true
		return e
	}
	// Status only: an Ingress whose status someone (pier included)
	// changed is checked, and repaired if it is not what pier publishes;
	// the status Service's addresses are what Ingresses publish.
	e.status = changed(prev.Ingresses, next.Ingresses, sameIngressStatus) ||
		(statusService != "" && changed(named(prev.Services, statusService), named(next.Services, statusService), sameServiceStatus)) ||
		gatewayAPIStatusChanged(prev, next)
	return e
}

// onlyIngressesChanged: of all translation reads, nothing but Ingresses
// changed between prev and next (the classes are checked before
// Ingresses). The other objects are compared as classify compares them
// for a rebuild: the ones the Ingresses of our class referred to at the
// last rebuild, which are all the load balancers IngressChanges keeps
// read; the changed Ingresses themselves are translated from next.
func onlyIngressesChanged(prev, next *source.Snapshot, refs references) bool {
	ps, ns := source.Differing(prev.EndpointSlices, next.EndpointSlices)
	return !gatewayAPIChanged(prev, next) &&
		!changedNamed(refs.services, prev.Services, next.Services, sameService) &&
		!loadBalancerServicesChanged(prev, next) &&
		!changed(refs.slices(ps), refs.slices(ns), sameSlice) &&
		!changedNamed(refs.secrets, prev.Secrets, next.Secrets, sameSecret) &&
		!changedNamed(refs.configMaps, prev.ConfigMaps, next.ConfigMaps, sameConfigMap) &&
		reflect.DeepEqual(prev.Nodes, next.Nodes)
}

// changedNamed: an object of set changed between the two lists.
func changedNamed[T interface {
	metav1.Object
	comparable
}](set nameSet, prev, next []T, same func(a, b T) bool) bool {
	p, n := source.Differing(prev, next)
	return changed(filterNamed(set, p), filterNamed(set, n), same)
}

// loadBalancerServicesChanged: a Service of type LoadBalancer changed,
// came or went.
func loadBalancerServicesChanged(prev, next *source.Snapshot) bool {
	p, n := source.Differing(prev.Services, next.Services)
	return changed(loadBalancerServices(p), loadBalancerServices(n), sameService)
}

// gatewayAPIStatusChanged: a status of a GatewayClass, Gateway or
// HTTPRoute changed (pier's own write coming back, another controller's
// parent entry, or someone clearing it). A status pass checks it and
// repairs what is not what pier publishes; the writer skips what is.
func gatewayAPIStatusChanged(prev, next *source.Snapshot) bool {
	return changed(prev.GatewayClasses, next.GatewayClasses, func(a, b *gwv1.GatewayClass) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.Gateways, next.Gateways, func(a, b *gwv1.Gateway) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.HTTPRoutes, next.HTTPRoutes, func(a, b *gwv1.HTTPRoute) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.GRPCRoutes, next.GRPCRoutes, func(a, b *gwv1.GRPCRoute) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.UDPRoutes, next.UDPRoutes, func(a, b *gwv1alpha2.UDPRoute) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.TCPRoutes, next.TCPRoutes, func(a, b *gwv1alpha2.TCPRoute) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.TLSRoutes, next.TLSRoutes, func(a, b *gwv1alpha2.TLSRoute) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	}) || changed(prev.BackendTLSPolicies, next.BackendTLSPolicies, func(a, b *gwv1.BackendTLSPolicy) bool {
		return reflect.DeepEqual(a.Status, b.Status)
	})
}

// changed reports whether two lists (sorted or not) differ in membership
// or in an object same says differs. Objects unchanged since the last
// snapshot are usually the very same pointer (the informer's cache), or
// carry the same resourceVersion, and are not compared further.
func changed[T interface {
	metav1.Object
	comparable
}](prev, next []T, same func(a, b T) bool) bool {
	if len(prev) != len(next) {
		return true
	}
	prev, next = source.Differing(prev, next) // only what is between their shared ends can differ
	byKey := make(map[[2]string]T, len(prev))
	for _, o := range prev {
		byKey[[2]string{o.GetNamespace(), o.GetName()}] = o
	}
	for _, n := range next {
		o, ok := byKey[[2]string{n.GetNamespace(), n.GetName()}]
		if !ok {
			return true
		}
		if o == n || (o.GetResourceVersion() != "" && o.GetResourceVersion() == n.GetResourceVersion()) {
			continue
		}
		if !same(o, n) {
			return true
		}
	}
	return false
}

func sameMeta(a, b metav1.Object) bool {
	ca, cb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	return a.GetUID() == b.GetUID() && ca.Equal(&cb) &&
		reflect.DeepEqual(a.GetLabels(), b.GetLabels()) && reflect.DeepEqual(a.GetAnnotations(), b.GetAnnotations())
}

func sameClass(a, b *networkingv1.IngressClass) bool {
	return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
}

// sameIngressSpec ignores status and bookkeeping (resourceVersion,
// managedFields): pier's own status writes come back through the source.
func sameIngressSpec(a, b *networkingv1.Ingress) bool {
	return sameMeta(a, b) && a.Generation == b.Generation && reflect.DeepEqual(a.Spec, b.Spec)
}

func sameIngressStatus(a, b *networkingv1.Ingress) bool {
	return reflect.DeepEqual(a.Status, b.Status)
}

func sameService(a, b *corev1.Service) bool {
	return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
}

func sameServiceStatus(a, b *corev1.Service) bool {
	return reflect.DeepEqual(a.Status, b.Status)
}

func sameSlice(a, b *discoveryv1.EndpointSlice) bool {
	return sameMeta(a, b) && a.AddressType == b.AddressType &&
		reflect.DeepEqual(a.Endpoints, b.Endpoints) && reflect.DeepEqual(a.Ports, b.Ports)
}

func sameSecret(a, b *corev1.Secret) bool {
	return sameMeta(a, b) && a.Type == b.Type && reflect.DeepEqual(a.Data, b.Data)
}

func sameConfigMap(a, b *corev1.ConfigMap) bool {
	return sameMeta(a, b) && reflect.DeepEqual(a.Data, b.Data) && reflect.DeepEqual(a.BinaryData, b.BinaryData)
}

// gatewayAPIChanged reports a change translation reads in the Gateway
// API objects: their spec (generation-tracked) or metadata, or the
// labels of a Namespace (allowedRoutes selectors). Their status is pier's
// own output and does not rebuild.
func gatewayAPIChanged(prev, next *source.Snapshot) bool {
	return changed(prev.GatewayClasses, next.GatewayClasses, func(a, b *gwv1.GatewayClass) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.Gateways, next.Gateways, func(a, b *gwv1.Gateway) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.HTTPRoutes, next.HTTPRoutes, func(a, b *gwv1.HTTPRoute) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.GRPCRoutes, next.GRPCRoutes, func(a, b *gwv1.GRPCRoute) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.UDPRoutes, next.UDPRoutes, func(a, b *gwv1alpha2.UDPRoute) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.TCPRoutes, next.TCPRoutes, func(a, b *gwv1alpha2.TCPRoute) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.TLSRoutes, next.TLSRoutes, func(a, b *gwv1alpha2.TLSRoute) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.ReferenceGrants, next.ReferenceGrants, func(a, b *gwv1beta1.ReferenceGrant) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(prev.BackendTLSPolicies, next.BackendTLSPolicies, func(a, b *gwv1.BackendTLSPolicy) bool {
		return sameMeta(a, b) && reflect.DeepEqual(a.Spec, b.Spec)
	}) || changed(routeNamespaces(prev), routeNamespaces(next), func(a, b *corev1.Namespace) bool {
		return reflect.DeepEqual(a.Labels, b.Labels)
	})
}

// routeNamespaces are the Namespaces holding a route: only their
// labels can change an attachment (allowedRoutes selectors). Namespaces
// that come and go without routes (every test, every tenant) rebuild
// nothing; a route that comes or goes with one is a change of its own.
func routeNamespaces(snap *source.Snapshot) []*corev1.Namespace {
	if len(snap.HTTPRoutes) == 0 && len(snap.GRPCRoutes) == 0 && len(snap.TCPRoutes) == 0 && len(snap.TLSRoutes) == 0 && len(snap.UDPRoutes) == 0 {
		return nil
	}
	has := make(map[string]bool, len(snap.HTTPRoutes)+len(snap.GRPCRoutes)+len(snap.TCPRoutes))
	for _, r := range snap.HTTPRoutes {
		has[r.Namespace] = true
	}
	for _, r := range snap.GRPCRoutes {
		has[r.Namespace] = true
	}
	for _, r := range snap.UDPRoutes {
		has[r.Namespace] = true
	}
	for _, r := range snap.TCPRoutes {
		has[r.Namespace] = true
	}
	for _, r := range snap.TLSRoutes {
		has[r.Namespace] = true
	}
	var out []*corev1.Namespace
	for _, ns := range snap.Namespaces {
		if has[ns.Name] {
			out = append(out, ns)
		}
	}
	return out
}

// named returns the objects called "namespace/name" (zero or one).
func named[T metav1.Object](list []T, key string) []T {
	var out []T
	for _, o := range list {
		if o.GetNamespace()+"/"+o.GetName() == key {
			out = append(out, o)
		}
	}
	return out
}

// loadBalancerServices are the Services of type LoadBalancer: any of them
// may be (or stop being) one pier serves with the native provider.
func loadBalancerServices(list []*corev1.Service) []*corev1.Service {
	var out []*corev1.Service
	for _, s := range list {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out = append(out, s)
		}
	}
	return out
}

// nameSet is a set of "namespace/name".
type nameSet map[string]bool

func filterNamed[T metav1.Object](set nameSet, list []T) []T {
	var out []T
	for _, o := range list {
		if set[o.GetNamespace()+"/"+o.GetName()] {
			out = append(out, o)
		}
	}
	return out
}

// slicesServices are the Services ("namespace/name", by the service-name
// label) of the slices that differ between prev and next: added,
// removed or changed, under their old label and their new one.
func slicesServices(prev, next []*discoveryv1.EndpointSlice) nameSet {
	out := nameSet{}
	service := func(es *discoveryv1.EndpointSlice) string {
		return es.Namespace + "/" + es.Labels[discoveryv1.LabelServiceName]
	}
	before := make(map[[2]string]*discoveryv1.EndpointSlice, len(prev))
	for _, es := range prev {
		before[[2]string{es.Namespace, es.Name}] = es
	}
	for _, es := range next {
		key := [2]string{es.Namespace, es.Name}
		old, ok := before[key]
		delete(before, key)
		switch {
		case !ok:
			out[service(es)] = true
		case old == es || (old.ResourceVersion != "" && old.ResourceVersion == es.ResourceVersion):
		case !sameSlice(old, es):
			out[service(old)], out[service(es)] = true, true
		}
	}
	for _, old := range before {
		out[service(old)] = true
	}
	return out
}
