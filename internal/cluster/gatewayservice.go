package cluster

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// Each accepted Gateway of ours gets a Service of its own in its
// namespace, "<gateway>-pier": a ClusterIP Service without selector
// whose EndpointSlice (same name) lists the Gateway's addresses, so
// in-cluster clients reach the Gateway by a DNS name
// (<gateway>-pier.<namespace>.svc) and kube-proxy forwards to its VIP or
// FIP. Both carry the Gateway's spec.infrastructure labels and
// annotations, the Gateway API's gateway-name label and pier's
// managed-by label, and are owned by the Gateway (garbage-collected with
// it). The writer (leader only, with the Gateway status) creates,
// updates and deletes only objects with pier's managed-by label and
// gateway-name label: a user's Service of the same name is left alone
// and the Gateway gets no Service. A Gateway whose name does not fit a
// Service name (a DNS label of 58 characters or fewer, for the "-pier")
// gets none either.

// gatewayServiceSuffix ends a published Gateway Service's name.
const gatewayServiceSuffix = "-pier"

// endpointSliceManagedBy is the EndpointSlice's managed-by value: not the
// EndpointSlice controller's, which would otherwise take it over; a
// label value, so no "/".
const endpointSliceManagedBy = "gateway.pier.dev"

// gatewayServiceName is the Service name of a Gateway, "" when its name
// cannot make one.
func gatewayServiceName(gateway string) string {
	name := gateway + gatewayServiceSuffix
	if len(validation.IsDNS1035Label(name)) > 0 || len(validation.IsValidLabelValue(gateway)) > 0 {
		return ""
	}
	return name
}

// publishGatewayServices brings every Gateway's published Service and
// EndpointSlice to what st says; one failing does not stop the others.
func (w *statusWriter) publishGatewayServices(ctx context.Context, snap *source.Snapshot, st *translate.GatewayStatus) {
	if w.client == nil || st.Infrastructure == nil {
		return
	}
	services := map[string]*corev1.Service{}
	for _, s := range snap.Services {
		services[s.Namespace+"/"+s.Name] = s
	}
	slicesByName := map[string]*discoveryv1.EndpointSlice{}
	for _, es := range snap.EndpointSlices {
		slicesByName[es.Namespace+"/"+es.Name] = es
	}
	want := map[string]bool{}
	for _, gw := range snap.Gateways {
		ref := gatewayRef(model.KindGateway, gw.Namespace, gw.Name)
		infra, ok := st.Infrastructure[ref]
		name := gatewayServiceName(gw.Name)
		if !ok || name == "" || len(infra.Ports) == 0 {
			continue
		}
		key := gw.Namespace + "/" + name
		want[key] = true
		svc, es := gatewayService(gw, name, infra, st.Gateways[ref].Addresses)
		wrote, err := w.writeGatewayService(ctx, services[key], svc)
		w.reportPublished("service", key, wrote, err)
		if err == nil {
			wrote, err = w.writeGatewayEndpointSlice(ctx, slicesByName[key], es)
			w.reportPublished("endpointslice", key, wrote, err)
		}
	}
	// What a Gateway no longer has: it is still in the snapshot but not
	// served (deleted Gateways take theirs with them, by owner).
	gateways := map[string]bool{}
	for _, gw := range snap.Gateways {
		gateways[gw.Namespace+"/"+gw.Name] = true
	}
	for key, s := range services {
		gw := s.Labels[gatewayapi.GatewayNameLabel]
		if want[key] || s.Labels[gatewayapi.ManagedByLabel] != gatewayapi.ManagedByValue || gw == "" ||
			!gateways[s.Namespace+"/"+gw] || !oursGateway(st, s.Namespace, gw) {
			continue
		}
		err := w.client.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &s.UID}})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		if err != nil {
			w.logger.Warn("could not delete the Service of a Gateway no longer served", "object", key, "error", err)
		} else {
			w.logger.Info("Service of a Gateway no longer served deleted", "object", key)
		}
	}
}

// reportPublished logs a published object's write or its failure, as
// report does a status's.
func (w *statusWriter) reportPublished(kind, key string, wrote bool, err error) {
	switch {
	case err != nil:
		w.logger.Warn("could not publish the Gateway's object", "kind", kind, "object", key, "error", err)
	case wrote:
		w.logger.Info("Gateway object published", "kind", kind, "object", key)
	}
}

// oursGateway: the Gateway has a status of ours (our class), so its
// Service is ours to delete when it is not served.
func oursGateway(st *translate.GatewayStatus, ns, name string) bool {
	_, ok := st.Gateways[gatewayRef(model.KindGateway, ns, name)]
	return ok
}

// gatewayService is the Service and EndpointSlice a Gateway should have.
func gatewayService(gw *gwv1.Gateway, name string, infra translate.GatewayInfrastructure,
	addrs []gwv1.GatewayStatusAddress) (*corev1.Service, *discoveryv1.EndpointSlice) {
	labels := maps.Clone(infra.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[gatewayapi.GatewayNameLabel] = gw.Name
	labels[gatewayapi.ManagedByLabel] = gatewayapi.ManagedByValue
	owner := metav1.OwnerReference{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID,
		Controller: ptrTo(true)}
	meta := metav1.ObjectMeta{Name: name, Namespace: gw.Namespace, Labels: labels, Annotations: maps.Clone(infra.Annotations),
		OwnerReferences: []metav1.OwnerReference{owner}}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}}
	es := &discoveryv1.EndpointSlice{ObjectMeta: *meta.DeepCopy(), AddressType: discoveryv1.AddressTypeIPv4}
	es.Labels[discoveryv1.LabelServiceName] = name
	es.Labels[discoveryv1.LabelManagedBy] = endpointSliceManagedBy
	for _, p := range infra.Ports {
		portName := strings.ToLower(p.Protocol) + "-" + strconv.Itoa(int(p.Port))
		proto := corev1.Protocol(p.Protocol)
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: portName, Protocol: proto, Port: p.Port,
			TargetPort: intstr.FromInt32(p.Port)})
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptrTo(portName), Protocol: ptrTo(proto), Port: ptrTo(p.Port)})
	}
	for _, a := range addrs {
		if ip, err := netip.ParseAddr(a.Value); err == nil && ip.Is4() {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip.String()},
				Conditions: discoveryv1.EndpointConditions{Ready: ptrTo(true)}})
		}
	}
	slices.SortFunc(es.Endpoints, func(a, b discoveryv1.Endpoint) int { return strings.Compare(a.Addresses[0], b.Addresses[0]) })
	return svc, es
}

func ptrTo[T any](v T) *T { return &v }

// ownedBy: an object pier published for this Gateway.
func ownedBy(meta, want metav1.ObjectMeta) bool {
	return meta.Labels[gatewayapi.ManagedByLabel] == gatewayapi.ManagedByValue &&
		meta.Labels[gatewayapi.GatewayNameLabel] == want.Labels[gatewayapi.GatewayNameLabel]
}

// sameMeta: labels, annotations and owner as wanted (nil and empty
// maps alike).
func sameMeta(got, want metav1.ObjectMeta) bool {
	return maps.Equal(got.Labels, want.Labels) && maps.Equal(got.Annotations, want.Annotations) &&
		apiequality.Semantic.DeepEqual(got.OwnerReferences, want.OwnerReferences)
}

func (w *statusWriter) writeGatewayService(ctx context.Context, cached, want *corev1.Service) (bool, error) {
	services := w.client.CoreV1().Services(want.Namespace)
	if cached == nil {
		_, err := services.Create(ctx, want, metav1.CreateOptions{FieldManager: "pier"})
		if apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("service %s exists and the snapshot does not show it yet: %w", want.Name, err)
		}
		return err == nil, err
	}
	if !ownedBy(cached.ObjectMeta, want.ObjectMeta) {
		return false, fmt.Errorf("service %s/%s exists and is not pier's: the Gateway gets no Service", want.Namespace, want.Name)
	}
	if sameMeta(cached.ObjectMeta, want.ObjectMeta) && apiequality.Semantic.DeepEqual(cached.Spec.Ports, want.Spec.Ports) {
		return false, nil
	}
	next := cached.DeepCopy()
	next.Labels, next.Annotations, next.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	next.Spec.Ports = want.Spec.Ports
	_, err := services.Update(ctx, next, metav1.UpdateOptions{FieldManager: "pier"})
	return err == nil, err
}

func (w *statusWriter) writeGatewayEndpointSlice(ctx context.Context, cached, want *discoveryv1.EndpointSlice) (bool, error) {
	endpointSlices := w.client.DiscoveryV1().EndpointSlices(want.Namespace)
	if cached == nil {
		_, err := endpointSlices.Create(ctx, want, metav1.CreateOptions{FieldManager: "pier"})
		return err == nil, err
	}
	if !ownedBy(cached.ObjectMeta, want.ObjectMeta) {
		return false, fmt.Errorf("endpointslice %s/%s exists and is not pier's", want.Namespace, want.Name)
	}
	if sameMeta(cached.ObjectMeta, want.ObjectMeta) && cached.AddressType == want.AddressType &&
		apiequality.Semantic.DeepEqual(cached.Ports, want.Ports) && apiequality.Semantic.DeepEqual(cached.Endpoints, want.Endpoints) {
		return false, nil
	}
	next := cached.DeepCopy()
	next.Labels, next.Annotations, next.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	next.Ports, next.Endpoints = want.Ports, want.Endpoints
	_, err := endpointSlices.Update(ctx, next, metav1.UpdateOptions{FieldManager: "pier"})
	return err == nil, err
}
