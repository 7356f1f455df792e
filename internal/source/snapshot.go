// Package source defines the typed snapshot that every source of objects
// fills (manifest files for pier run, informers for the controller).
// Nothing downstream knows which source fed it.
package source

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// Snapshot is a consistent view of the objects pier reads. Slices are
// owned by the snapshot: consumers must not modify the objects.
type Snapshot struct {
	Ingresses      []*networkingv1.Ingress
	IngressClasses []*networkingv1.IngressClass
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	Secrets        []*corev1.Secret
	// Nodes are filled by the Kubernetes source only; pier run has one
	// node of its own.
	Nodes []*corev1.Node
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
