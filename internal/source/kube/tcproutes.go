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
)

// TCPRoute is v1 in the standard channel since Gateway API v1.6 (and
// v1alpha2, deprecated, in the experimental one before and beside it).
// pier's module (v1.4.1) has a typed client for v1alpha2 only, so a v1
// TCPRoute is read through the dynamic client and converted into the
// v1alpha2 type, whose fields are v1's. v1 is preferred when served.

// TCPRouteV1 is the v1 TCPRoute resource.
var TCPRouteV1 = schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: "tcproutes"}

// TCPRouteOf converts a v1 TCPRoute read as unstructured; its TypeMeta
// keeps apiVersion v1, which says where its status is written.
func TCPRouteOf(u *unstructured.Unstructured) (*gwv1alpha2.TCPRoute, error) {
	var r gwv1alpha2.TCPRoute
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("tcproute %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &r, nil
}

// UnstructuredTCPRoute is r as a v1 TCPRoute for the dynamic client.
func UnstructuredTCPRoute(r *gwv1alpha2.TCPRoute) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, fmt.Errorf("tcproute %s/%s: %w", r.Namespace, r.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("TCPRoute")
	return u, nil
}

// tcpRoutesV1Unwatched says why v1 TCPRoutes cannot be watched ("" when
// they can).
func (w *gatewayWatch) tcpRoutesV1Unwatched(ctx context.Context) string {
	if w.dynamic == nil {
		return "no dynamic client"
	}
	list, err := w.discovery.ServerResourcesForGroupVersion(gwv1.GroupVersion.String())
	if err != nil {
		return "discovery of " + gwv1.GroupVersion.String() + ": " + err.Error()
	}
	if !servesResource(list, "tcproutes") {
		return gwv1.GroupVersion.String() + " does not serve tcproutes"
	}
	_, err = w.dynamic.Resource(TCPRouteV1).Namespace(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing tcproutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list tcproutes: " + err.Error()
	}
	return ""
}

// tcpRouteWatch is the TCPRoute informer of the version served, its
// lister, and what starts it (nil for the typed one, which the Gateway
// API's factory starts).
type tcpRouteWatch struct {
	informer cache.SharedIndexInformer
	list     func() ([]*gwv1alpha2.TCPRoute, error)
	start    func()
}

// watchTCPRoutes picks the TCPRoute informer of the version served, v1
// first, then the typed v1alpha2 one; a zero watch when neither can be
// watched, which the log says once.
func (w *gatewayWatch) watchTCPRoutes(ctx context.Context, typed func() tcpRouteWatch) tcpRouteWatch {
	v1Reason := w.tcpRoutesV1Unwatched(ctx)
	if v1Reason == "" {
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dynamic, 0, w.namespace, nil)
		inf := f.ForResource(TCPRouteV1)
		start := func() {
			f.Start(ctx.Done())
			go func() {
				<-ctx.Done()
				f.Shutdown()
			}()
		}
		return tcpRouteWatch{informer: inf.Informer(), start: start, list: func() ([]*gwv1alpha2.TCPRoute, error) {
			objs, err := inf.Lister().List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]*gwv1alpha2.TCPRoute, 0, len(objs))
			for _, o := range objs {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				r, err := TCPRouteOf(u)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
			}
			return out, nil
		}}
	}
	if reason := w.tcpRoutesUnwatched(ctx); reason != "" {
		w.logger.Info("TCPRoutes are not served; the rest of the Gateway API is", "reason", reason, "v1", v1Reason)
		return tcpRouteWatch{}
	}
	return typed()
}
