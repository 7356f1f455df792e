package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"
)

// UDPRoute is v1 in the standard channel since Gateway API v1.7, and
// v1alpha2 in the experimental channel (before v1.7, and the version
// the standard CRD keeps unserved since). pier's module (v1.4.1) has a
// typed client for v1alpha2 only, so a v1 UDPRoute is read through the
// dynamic client and converted into the v1alpha2 type, whose fields
// are v1's. v1 is preferred when served; its absence costs only
// UDPRoutes.

// UDPRouteV1 is the v1 UDPRoute resource.
var UDPRouteV1 = schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: "udproutes"}

// UDPRouteOf converts a v1 UDPRoute read as unstructured; its TypeMeta
// keeps apiVersion v1, which says where its status is written.
func UDPRouteOf(u *unstructured.Unstructured) (*gwv1alpha2.UDPRoute, error) {
	var r gwv1alpha2.UDPRoute
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("udproute %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &r, nil
}

// UnstructuredUDPRoute is r as a v1 UDPRoute for the dynamic client.
func UnstructuredUDPRoute(r *gwv1alpha2.UDPRoute) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, fmt.Errorf("udproute %s/%s: %w", r.Namespace, r.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("UDPRoute")
	return u, nil
}

// udpRoutesV1Unwatched says why v1 UDPRoutes cannot be watched ("" when
// they can).
func (w *gatewayWatch) udpRoutesV1Unwatched(ctx context.Context) string {
	if w.dynamic == nil {
		return "no dynamic client"
	}
	gv := gwv1.GroupVersion.String()
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return "discovery of " + gv + ": " + err.Error()
	}
	if !servesResource(list, "udproutes") {
		return gv + " does not serve udproutes: install the standard channel's UDPRoute CRD of Gateway API v1.7 or later"
	}
	_, err = w.dynamic.Resource(UDPRouteV1).Namespace(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing udproutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list udproutes: " + err.Error()
	}
	return ""
}

// udpRoutesUnwatched says why v1alpha2 UDPRoutes cannot be watched (""
// when they can).
func (w *gatewayWatch) udpRoutesUnwatched(ctx context.Context) string {
	gv := gwv1alpha2.GroupVersion.String()
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return gv + " is not served: install the experimental channel's UDPRoute CRD"
	case err != nil:
		return "discovery of " + gv + ": " + err.Error()
	}
	if !servesResource(list, "udproutes") {
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

// udpRouteWatch is the UDPRoute informer of the version served, its
// lister, and what starts it (nil for the typed one, which the Gateway
// API's factory starts).
type udpRouteWatch struct {
	informer cache.SharedIndexInformer
	list     func() ([]*gwv1alpha2.UDPRoute, error)
	start    func()
}

// watchUDPRoutes picks the UDPRoute informer of the version served, v1
// first (through the dynamic client), then the typed v1alpha2 one; a
// zero watch when neither can be watched, which the log says once.
func (w *gatewayWatch) watchUDPRoutes(ctx context.Context, f gwinformers.SharedInformerFactory) udpRouteWatch {
	v1Reason := w.udpRoutesV1Unwatched(ctx)
	if v1Reason == "" {
		df := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dynamic, 0, w.namespace, nil)
		inf := df.ForResource(UDPRouteV1)
		start := func() {
			df.Start(ctx.Done())
			go func() {
				<-ctx.Done()
				df.Shutdown()
			}()
		}
		return udpRouteWatch{informer: inf.Informer(), start: start, list: func() ([]*gwv1alpha2.UDPRoute, error) {
			objs, err := inf.Lister().List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]*gwv1alpha2.UDPRoute, 0, len(objs))
			for _, o := range objs {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				r, err := UDPRouteOf(u)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}}
	}
	if reason := w.udpRoutesUnwatched(ctx); reason != "" {
		w.logger.Info("UDPRoutes are not served; the rest of the Gateway API is", "reason", reason, "v1", v1Reason)
		return udpRouteWatch{}
	}
	inf := f.Gateway().V1alpha2().UDPRoutes()
	return udpRouteWatch{informer: inf.Informer(), list: func() ([]*gwv1alpha2.UDPRoute, error) {
		return inf.Lister().List(labels.Everything())
	}}
}
