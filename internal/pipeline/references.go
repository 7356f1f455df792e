package pipeline

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// references are the Services (and so their EndpointSlices), Secrets
// and ConfigMaps (custom-headers) that the Ingresses of our class name.
type references struct {
	services   nameSet
	secrets    nameSet
	configMaps nameSet
}

// referencesOf collects what the Ingresses in ours refer to in snap.
func referencesOf(snap *source.Snapshot, ours map[model.ObjectRef]bool) references {
	r := references{services: nameSet{}, secrets: nameSet{}, configMaps: nameSet{}}
	if snap == nil {
		return r
	}
	for ref := range ours {
		if ref.Kind == model.KindService { // a Service of type LoadBalancer: its endpoints
			r.services[ref.Namespace+"/"+ref.Name] = true
		}
	}
	gatewayReferences(snap, ours, r)
	for _, ing := range snap.Ingresses {
		if !ours[model.IngressRef(ing.Namespace, ing.Name)] {
			continue
		}
		if b := ing.Spec.DefaultBackend; b != nil && b.Service != nil {
			r.services[ing.Namespace+"/"+b.Service.Name] = true
		}
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				continue
			}
			for _, p := range rule.HTTP.Paths {
				if p.Backend.Service != nil {
					r.services[ing.Namespace+"/"+p.Backend.Service.Name] = true
				}
			}
		}
		for _, t := range ing.Spec.TLS {
			if t.SecretName != "" {
				r.secrets[ing.Namespace+"/"+t.SecretName] = true
			}
		}
		for _, ref := range annotation.Secrets(ing) {
			r.secrets[ref.Namespace+"/"+ref.Name] = true
		}
		for _, ref := range annotation.ConfigMaps(ing) {
			r.configMaps[ref.Namespace+"/"+ref.Name] = true
		}
	}
	return r
}

// gatewayReferences adds the Secrets of our Gateways' listeners and of
// their backend client certificates, the ConfigMaps of their client CAs,
// and the
// Services of every HTTPRoute naming one of them, in whatever namespace
// they name (a ReferenceGrant may permit it; one that appears is a
// Gateway API change and rebuilds anyway).
func gatewayReferences(snap *source.Snapshot, ours map[model.ObjectRef]bool, r references) {
	for _, gw := range snap.Gateways {
		if !ours[model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}] {
			continue
		}
		for _, l := range gw.Spec.Listeners {
			if l.TLS == nil {
				continue
			}
			for _, c := range l.TLS.CertificateRefs {
				r.secrets[refNamespace(c.Namespace, gw.Namespace)+"/"+string(c.Name)] = true
			}
		}
		for _, ref := range source.FrontendCAConfigMaps(gw) {
			r.configMaps[ref.Namespace+"/"+ref.Name] = true
		}
		if gw.Spec.TLS != nil && gw.Spec.TLS.Backend != nil && gw.Spec.TLS.Backend.ClientCertificateRef != nil {
			c := gw.Spec.TLS.Backend.ClientCertificateRef
			r.secrets[refNamespace(c.Namespace, gw.Namespace)+"/"+string(c.Name)] = true
		}
	}
	for _, route := range snap.HTTPRoutes {
		if !namesOurGateway(route.Namespace, route.Spec.ParentRefs, ours) {
			continue
		}
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				r.services[refNamespace(b.Namespace, route.Namespace)+"/"+string(b.Name)] = true
			}
		}
	}
	// A BackendTLSPolicy's CA ConfigMaps: every policy's, as the
	// Services they target may be any route's.
	for _, p := range snap.BackendTLSPolicies {
		for _, c := range p.Spec.Validation.CACertificateRefs {
			r.configMaps[p.Namespace+"/"+string(c.Name)] = true
		}
	}
	for _, route := range snap.GRPCRoutes {
		if !namesOurGateway(route.Namespace, route.Spec.ParentRefs, ours) {
			continue
		}
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				r.services[refNamespace(b.Namespace, route.Namespace)+"/"+string(b.Name)] = true
			}
		}
	}
	for _, route := range snap.UDPRoutes {
		if !namesOurGateway(route.Namespace, route.Spec.ParentRefs, ours) {
			continue
		}
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				r.services[refNamespace(b.Namespace, route.Namespace)+"/"+string(b.Name)] = true
			}
		}
	}
	for _, route := range snap.TCPRoutes {
		if !namesOurGateway(route.Namespace, route.Spec.ParentRefs, ours) {
			continue
		}
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				r.services[refNamespace(b.Namespace, route.Namespace)+"/"+string(b.Name)] = true
			}
		}
	}
	for _, route := range snap.TLSRoutes {
		if !namesOurGateway(route.Namespace, route.Spec.ParentRefs, ours) {
			continue
		}
		for _, rule := range route.Spec.Rules {
			for _, b := range rule.BackendRefs {
				r.services[refNamespace(b.Namespace, route.Namespace)+"/"+string(b.Name)] = true
			}
		}
	}
}

// refNamespace is a reference's namespace, or def when it names none.
func refNamespace(ns *gwv1.Namespace, def string) string {
	if ns != nil && *ns != "" {
		return string(*ns)
	}
	return def
}

func namesOurGateway(routeNS string, parents []gwv1.ParentReference, ours map[model.ObjectRef]bool) bool {
	for _, p := range parents {
		ns := routeNS
		if p.Namespace != nil {
			ns = string(*p.Namespace)
		}
		if ours[model.ObjectRef{Kind: model.KindGateway, Namespace: ns, Name: string(p.Name)}] {
			return true
		}
	}
	return false
}

// slices returns the EndpointSlices of referenced Services.
func (r references) slices(list []*discoveryv1.EndpointSlice) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, es := range list {
		if r.services[es.Namespace+"/"+es.Labels[discoveryv1.LabelServiceName]] {
			out = append(out, es)
		}
	}
	return out
}
