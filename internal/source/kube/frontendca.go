package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/source"
)

// frontendCAs watches the ConfigMaps Gateways name as client certificate
// CAs (source.FrontendCAConfigMaps), each by name like the custom-headers
// ones, never the whole cluster's.
type frontendCAs struct {
	watches *namedWatches[*corev1.ConfigMap]
}

func (f frontendCAs) objects(ctx context.Context, gws []*gwv1.Gateway) []*corev1.ConfigMap {
	var refs []annotation.Object
	for _, gw := range gws {
		refs = append(refs, source.FrontendCAConfigMaps(gw)...)
	}
	return f.watches.objectsNamed(ctx, refs)
}

// addConfigMaps appends to list the ConfigMaps of more it does not hold
// (an Ingress and a Gateway may name the same one).
func addConfigMaps(list, more []*corev1.ConfigMap) []*corev1.ConfigMap {
	have := make(map[string]bool, len(list))
	for _, cm := range list {
		have[cm.Namespace+"/"+cm.Name] = true
	}
	for _, cm := range more {
		if key := cm.Namespace + "/" + cm.Name; !have[key] {
			have[key] = true
			list = append(list, cm)
		}
	}
	return list
}
