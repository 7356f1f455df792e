package files

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/source"
)

// finish does what the apiserver would do on create and pier depends on:
// it defaults, refuses what would be refused, and says whether the object
// is kept at all (only Secrets holding a certificate are).
func finish(obj kubeObject) (keep bool, err error) {
	if err := finishMeta(obj); err != nil {
		return false, err
	}
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		return true, checkIngress(o)
	case *corev1.Service:
		defaultService(o)
	case *discoveryv1.EndpointSlice:
		defaultEndpointSlice(o)
	case *corev1.Secret:
		return finishSecret(o)
	}
	return true, nil
}

// clusterScoped reports the kept kinds that have no namespace, by the kind
// a document names (describe has no decoded object to look at).
func clusterScoped(kind string) bool {
	return kind == "IngressClass" || kind == "Node" || kind == "Namespace" || kind == "GatewayClass"
}

// finishMeta defaults the namespace and checks names, because translation
// builds HAProxy names and UUIDs from them (and placement, node names).
func finishMeta(obj kubeObject) error {
	switch obj.(type) {
	case *networkingv1.IngressClass, *corev1.Node, *corev1.Namespace, *gwv1.GatewayClass: // as clusterScoped
		obj.SetNamespace("") // the apiserver ignores it too
	default:
		if obj.GetNamespace() == "" {
			obj.SetNamespace(metav1.NamespaceDefault)
		}
	}
	if obj.GetName() == "" {
		return errors.New("metadata.name is required")
	}
	if errs := validation.IsDNS1123Label(obj.GetNamespace()); obj.GetNamespace() != "" && len(errs) > 0 {
		return fmt.Errorf("metadata.namespace %q: %s", obj.GetNamespace(), strings.Join(errs, "; "))
	}
	check := validation.IsDNS1123Subdomain
	if _, ok := obj.(*corev1.Service); ok {
		check = validation.IsDNS1035Label
	}
	if errs := check(obj.GetName()); len(errs) > 0 {
		return fmt.Errorf("metadata.name %q: %s", obj.GetName(), strings.Join(errs, "; "))
	}
	return nil
}

// checkIngress refuses a path without pathType, as networking.k8s.io/v1
// does; translation can then rely on it being set.
func checkIngress(ing *networkingv1.Ingress) error {
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for j, path := range rule.HTTP.Paths {
			if path.PathType == nil {
				return fmt.Errorf("spec.rules[%d].http.paths[%d].pathType is required", i, j)
			}
		}
	}
	return nil
}

func defaultService(svc *corev1.Service) {
	if svc.Spec.Type == "" {
		svc.Spec.Type = corev1.ServiceTypeClusterIP
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
}

// defaultEndpointSlice defaults ports as the apiserver does. Endpoint
// conditions.ready stays nil when unset: the API defines nil as ready.
func defaultEndpointSlice(es *discoveryv1.EndpointSlice) {
	for i := range es.Ports {
		p := &es.Ports[i]
		if p.Protocol == nil {
			tcp := corev1.ProtocolTCP
			p.Protocol = &tcp
		}
		if p.Name == nil {
			empty := ""
			p.Name = &empty
		}
	}
}

// finishSecret merges stringData into data (stringData wins, as in the
// apiserver) and keeps the Secrets pier may read: TLS Secrets, which must
// hold a certificate and key, and Opaque ones (a certificate and key, or
// the users of auth-type basic, in any key with auth-secret-type
// auth-map). Translation reads only the ones an Ingress names.
func finishSecret(sec *corev1.Secret) (bool, error) {
	if len(sec.StringData) > 0 {
		if sec.Data == nil {
			sec.Data = make(map[string][]byte, len(sec.StringData))
		}
		for k, v := range sec.StringData {
			sec.Data[k] = []byte(v)
		}
		sec.StringData = nil
	}
	if sec.Type == "" {
		sec.Type = corev1.SecretTypeOpaque
	}
	_, hasCert := sec.Data[corev1.TLSCertKey]
	_, hasKey := sec.Data[corev1.TLSPrivateKeyKey]
	switch sec.Type {
	case corev1.SecretTypeTLS:
		if !hasCert || !hasKey {
			return false, fmt.Errorf("type %s requires data %q and %q",
				corev1.SecretTypeTLS, corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
		}
		return true, nil
	case corev1.SecretTypeOpaque:
		return true, nil // until dropUnreferenced
	}
	return false, nil
}

// add files a kept object into the snapshot.
func add(snap *source.Snapshot, obj kubeObject) {
	switch o := obj.(type) {
	case *networkingv1.Ingress:
		snap.Ingresses = append(snap.Ingresses, o)
	case *networkingv1.IngressClass:
		snap.IngressClasses = append(snap.IngressClasses, o)
	case *corev1.Service:
		snap.Services = append(snap.Services, o)
	case *discoveryv1.EndpointSlice:
		snap.EndpointSlices = append(snap.EndpointSlices, o)
	case *corev1.Secret:
		snap.Secrets = append(snap.Secrets, o)
	case *corev1.ConfigMap:
		snap.ConfigMaps = append(snap.ConfigMaps, o)
	case *corev1.Node:
		snap.Nodes = append(snap.Nodes, nodeOf(o))
	case *corev1.Namespace:
		snap.Namespaces = append(snap.Namespaces, o)
	case *gwv1.GatewayClass:
		snap.GatewayClasses = append(snap.GatewayClasses, o)
	case *gwv1.Gateway:
		snap.Gateways = append(snap.Gateways, o)
	case *gwv1.HTTPRoute:
		snap.HTTPRoutes = append(snap.HTTPRoutes, o)
	case *gwv1.GRPCRoute:
		snap.GRPCRoutes = append(snap.GRPCRoutes, o)
	case *gwv1alpha2.UDPRoute:
		snap.UDPRoutes = append(snap.UDPRoutes, o)
	case *gwv1alpha2.TCPRoute:
		snap.TCPRoutes = append(snap.TCPRoutes, o)
	case *gwv1alpha2.TLSRoute:
		snap.TLSRoutes = append(snap.TLSRoutes, o)
	case *gwv1beta1.ReferenceGrant:
		snap.ReferenceGrants = append(snap.ReferenceGrants, o)
	case *gwv1.BackendTLSPolicy:
		snap.BackendTLSPolicies = append(snap.BackendTLSPolicies, o)
	case *source.ListenerSet:
		snap.ListenerSets = append(snap.ListenerSets, o)
	}
}

// dropUnreferenced drops the Opaque Secrets that hold no certificate and
// that no Ingress names in auth-secret or proxy-ssl-secret: pier keeps
// no password it does not serve; and the ConfigMaps no Ingress names in
// custom-headers, no Gateway as a client certificate CA and no
// BackendTLSPolicy as its CA.
func dropUnreferenced(snap *source.Snapshot) {
	// Each looks at every Ingress: skipped when there is nothing to drop.
	dropUnreferencedSecrets(snap)
	if len(snap.ConfigMaps) > 0 {
		dropUnreferencedConfigMaps(snap)
	}
}

func dropUnreferencedSecrets(snap *source.Snapshot) {
	if !slices.ContainsFunc(snap.Secrets, passwordsOnly) {
		return // every Secret holds a certificate: no need to look at the Ingresses
	}
	named := map[string]bool{}
	for _, ing := range snap.Ingresses {
		for _, ref := range annotation.Secrets(ing) {
			named[ref.Namespace+"/"+ref.Name] = true
		}
	}
	snap.Secrets = slices.DeleteFunc(snap.Secrets, func(sec *corev1.Secret) bool {
		return passwordsOnly(sec) && !named[sec.Namespace+"/"+sec.Name]
	})
}

// passwordsOnly reports an Opaque Secret without a certificate and key.
func passwordsOnly(sec *corev1.Secret) bool {
	_, hasCert := sec.Data[corev1.TLSCertKey]
	_, hasKey := sec.Data[corev1.TLSPrivateKeyKey]
	return sec.Type == corev1.SecretTypeOpaque && !(hasCert && hasKey)
}

func dropUnreferencedConfigMaps(snap *source.Snapshot) {
	namedMaps := map[string]bool{}
	for _, ing := range snap.Ingresses {
		for _, ref := range annotation.ConfigMaps(ing) {
			namedMaps[ref.Namespace+"/"+ref.Name] = true
		}
	}
	for _, gw := range snap.Gateways {
		for _, ref := range source.FrontendCAConfigMaps(gw) {
			namedMaps[ref.Namespace+"/"+ref.Name] = true
		}
	}
	for _, ref := range source.BackendTLSCAConfigMaps(snap.BackendTLSPolicies) {
		namedMaps[ref.Namespace+"/"+ref.Name] = true
	}
	snap.ConfigMaps = slices.DeleteFunc(snap.ConfigMaps, func(cm *corev1.ConfigMap) bool {
		return !namedMaps[cm.Namespace+"/"+cm.Name]
	})
}

// nodeOf is what placement reads of a Node manifest. A Node in a file is
// the operator's statement that the node exists and runs, so it is Ready
// whatever its status says; status is written by kubelets, and no kubelet
// reports to a file. Only spec.unschedulable (kubectl cordon) is read.
func nodeOf(n *corev1.Node) source.Node {
	return source.Node{Name: n.Name, Ready: true, Draining: n.Spec.Unschedulable}
}

// sortSnapshot orders objects by namespace/name, so the snapshot does not
// depend on how the manifests are spread over files.
func sortSnapshot(snap *source.Snapshot) {
	slices.SortFunc(snap.Ingresses, byName[*networkingv1.Ingress])
	slices.SortFunc(snap.IngressClasses, byName[*networkingv1.IngressClass])
	slices.SortFunc(snap.Services, byName[*corev1.Service])
	slices.SortFunc(snap.EndpointSlices, byName[*discoveryv1.EndpointSlice])
	slices.SortFunc(snap.Secrets, byName[*corev1.Secret])
	slices.SortFunc(snap.ConfigMaps, byName[*corev1.ConfigMap])
	slices.SortFunc(snap.Namespaces, byName[*corev1.Namespace])
	slices.SortFunc(snap.GatewayClasses, byName[*gwv1.GatewayClass])
	slices.SortFunc(snap.Gateways, byName[*gwv1.Gateway])
	slices.SortFunc(snap.HTTPRoutes, byName[*gwv1.HTTPRoute])
	slices.SortFunc(snap.GRPCRoutes, byName[*gwv1.GRPCRoute])
	slices.SortFunc(snap.UDPRoutes, byName[*gwv1alpha2.UDPRoute])
	slices.SortFunc(snap.TCPRoutes, byName[*gwv1alpha2.TCPRoute])
	slices.SortFunc(snap.TLSRoutes, byName[*gwv1alpha2.TLSRoute])
	slices.SortFunc(snap.ReferenceGrants, byName[*gwv1beta1.ReferenceGrant])
	slices.SortFunc(snap.BackendTLSPolicies, byName[*gwv1.BackendTLSPolicy])
	slices.SortFunc(snap.ListenerSets, byName[*source.ListenerSet])
	slices.SortFunc(snap.Nodes, func(a, b source.Node) int { return cmp.Compare(a.Name, b.Name) })
}

func byName[T metav1.Object](a, b T) int {
	return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
}
