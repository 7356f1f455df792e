// Package source defines the typed snapshot that every source of objects
// fills (manifest files for pier run, informers for the controller).
// Nothing downstream knows which source fed it.
package source

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
)

// Snapshot is a consistent view of the objects pier reads. Slices are
// owned by the snapshot: consumers must not modify the objects.
type Snapshot struct {
	Ingresses      []*networkingv1.Ingress
	IngressClasses []*networkingv1.IngressClass
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret
	// ConfigMaps are those Ingresses name (custom-headers), Gateways
	// name as client certificate CAs (FrontendCAConfigMaps) and
	// BackendTLSPolicies name (caCertificateRefs), and only those.
	ConfigMaps []*corev1.ConfigMap
	// The Gateway API's standard channel. Namespaces are only read for
	// the labels an allowedRoutes namespace selector tests.
	GatewayClasses []*gwv1.GatewayClass
	Gateways       []*gwv1.Gateway
	HTTPRoutes     []*gwv1.HTTPRoute
	GRPCRoutes     []*gwv1.GRPCRoute
	// UDPRoutes are the experimental channel's (v1alpha2).
	UDPRoutes []*gwv1alpha2.UDPRoute
	// TCPRoutes are the experimental channel's (v1alpha2 in v1.4).
	TCPRoutes []*gwv1alpha2.TCPRoute
	// TLSRoutes, read at v1 (the standard channel since v1.5), v1alpha3
	// or v1alpha2 into the v1alpha2 type of pier's module: the fields
	// pier reads are the same in all three.
	TLSRoutes []*gwv1alpha2.TLSRoute
	// ListenerSets, read at v1 (the standard channel since v1.5) into
	// pier's own type (listenerset.go).
	ListenerSets []*ListenerSet
	// ReferenceGrants (v1beta1, the standard channel's version in
	// v1.4) permit cross-namespace backendRefs and certificateRefs.
	ReferenceGrants []*gwv1beta1.ReferenceGrant
	// BackendTLSPolicies (v1, standard channel since v1.4) say how the
	// Gateways' pools verify the TLS of the Services they target.
	BackendTLSPolicies []*gwv1.BackendTLSPolicy
	Namespaces         []*corev1.Namespace
	// Nodes that may run HAProxy: the Kubernetes source fills them from
	// its Node informer (those matching --node-selector), pier run puts
	// its one node. Both modes place load balancers from this list only.
	Nodes []Node
}

// Node is a node as placement sees it.
type Node struct {
	Name  string
	Ready bool
	// Address is the node's address on the segment its VRRP adverts
	// cross (the zero Addr when unknown): the pier.dev/vrrp-address
	// annotation, else the first IPv4 InternalIP, else the first
	// InternalIP. pier run's one node is 127.0.0.1.
	Address netip.Addr
	// Draining is set on a cordoned node (spec.unschedulable): it keeps
	// its placements, but its agent hands the addresses it holds to the
	// standby, and no new load balancer is placed on it.
	Draining bool
}

// Secret returns the Secret namespace/name, or nil.
func (s *Snapshot) Secret(namespace, name string) *corev1.Secret {
	for _, sec := range s.Secrets {
		if sec.Namespace == namespace && sec.Name == name {
			return sec
		}
	}
	return nil
}

// ConfigMap returns the ConfigMap namespace/name, or nil.
func (s *Snapshot) ConfigMap(namespace, name string) *corev1.ConfigMap {
	for _, cm := range s.ConfigMaps {
		if cm.Namespace == namespace && cm.Name == name {
			return cm
		}
	}
	return nil
}

// Differing drops what two versions of a snapshot's list share at both
// ends: the same objects in the same places, counted from the start and
// from the end. Both sources list what did not change that way (the files
// source in file order, with a new file's objects last, and an endpoint
// change in place; the Kubernetes source sorted by name), so what is left
// is all that can differ: a comparison of the rest finds what a
// comparison of the whole lists finds, at the cost of the few objects
// that changed or moved, not of thousands.
func Differing[T comparable](prev, next []T) ([]T, []T) {
	lead := 0
	for lead < len(prev) && lead < len(next) && prev[lead] == next[lead] {
		lead++
	}
	prev, next = prev[lead:], next[lead:]
	tail := 0
	for tail < len(prev) && tail < len(next) && prev[len(prev)-1-tail] == next[len(next)-1-tail] {
		tail++
	}
	return prev[:len(prev)-tail], next[:len(next)-tail]
}
