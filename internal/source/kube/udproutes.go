package kube

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// UDPRoute is v1alpha2, in the experimental channel only: most clusters
// do not install its CRD, so its absence costs only UDPRoutes.

// udpRoutesUnwatched says why UDPRoutes cannot be watched ("" when they
// can).
func (w *gatewayWatch) udpRoutesUnwatched(ctx context.Context) string {
	gv := gwv1alpha2.GroupVersion.String()
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return gv + " is not served: install the experimental channel's UDPRoute CRD"
	case err != nil:
		return "discovery of " + gv + ": " + err.Error()
	}
	served := false
	for _, r := range list.APIResources {
		served = served || r.Name == "udproutes"
	}
	if !served {
		return gv + " does not serve udproutes: install the experimental channel's UDPRoute CRD"
	}
	_, err = w.client.GatewayV1alpha2().UDPRoutes(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing udproutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list udproutes: " + err.Error()
	}
	return ""
}

// watchUDPRoutes returns the UDPRoute informer and its lister, or nils
// (with the reason logged) when UDPRoutes are not served.
func (w *gatewayWatch) watchUDPRoutes(ctx context.Context, f gwinformers.SharedInformerFactory) (cache.SharedIndexInformer, func() ([]*gwv1alpha2.UDPRoute, error)) {
	if reason := w.udpRoutesUnwatched(ctx); reason != "" {
		w.logger.Info("UDPRoutes are not served; the rest of the Gateway API is", "reason", reason)
		return nil, nil
	}
	inf := f.Gateway().V1alpha2().UDPRoutes()
	return inf.Informer(), func() ([]*gwv1alpha2.UDPRoute, error) { return inf.Lister().List(labels.Everything()) }
}
