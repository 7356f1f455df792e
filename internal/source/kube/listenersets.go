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

	"pier.dev/pier/internal/source"
)

// ListenerSets are v1 in the standard channel since Gateway API v1.5.
// pier's module (v1.4.1) has no v1 type, so they are read through the
// dynamic client into pier's own (source.ListenerSet), as TLSRoutes are
// (tlsroutes.go), and their status is written back the same way.

// ListenerSetV1 is the v1 ListenerSet resource.
var ListenerSetV1 = schema.GroupVersionResource{Group: gwv1.GroupName, Version: "v1", Resource: "listenersets"}

// ListenerSetOf converts a ListenerSet read as unstructured.
func ListenerSetOf(u *unstructured.Unstructured) (*source.ListenerSet, error) {
	var ls source.ListenerSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ls); err != nil {
		return nil, fmt.Errorf("listenerset %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &ls, nil
}

// UnstructuredListenerSet is ls as the dynamic client writes it.
func UnstructuredListenerSet(ls *source.ListenerSet) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ls)
	if err != nil {
		return nil, fmt.Errorf("listenerset %s/%s: %w", ls.Namespace, ls.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("ListenerSet")
	return u, nil
}

// listenerSetsUnwatched says why ListenerSets cannot be watched ("" when
// they can).
func (w *gatewayWatch) listenerSetsUnwatched(ctx context.Context) string {
	gv := ListenerSetV1.GroupVersion().String()
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return "discovery of " + gv + ": " + err.Error()
	}
	if !servesResource(list, ListenerSetV1.Resource) {
		return gv + " does not serve listenersets"
	}
	_, err = w.dynamic.Resource(ListenerSetV1).Namespace(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing listenersets is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list listenersets: " + err.Error()
	}
	return ""
}

// listenerSetWatch is the ListenerSet informer, its lister and what
// starts it; zero when ListenerSets cannot be watched.
type listenerSetWatch struct {
	informer cache.SharedIndexInformer
	list     func() ([]*source.ListenerSet, error)
	start    func()
}

// watchListenerSets watches v1 ListenerSets; a zero watch when they are
// not served or not listable (the log says why, once): the rest of the
// Gateway API is served without them.
func (w *gatewayWatch) watchListenerSets(ctx context.Context) listenerSetWatch {
	if w.dynamic == nil {
		w.logger.Info("ListenerSets are not served; the rest of the Gateway API is", "reason", "no dynamic client")
		return listenerSetWatch{}
	}
	if reason := w.listenerSetsUnwatched(ctx); reason != "" {
		w.logger.Info("ListenerSets are not served; the rest of the Gateway API is", "reason", reason)
		return listenerSetWatch{}
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dynamic, 0, w.namespace, nil)
	inf := f.ForResource(ListenerSetV1)
	return listenerSetWatch{
		informer: inf.Informer(),
		start: func() {
			f.Start(ctx.Done())
			go func() {
				<-ctx.Done()
				f.Shutdown()
			}()
		},
		list: func() ([]*source.ListenerSet, error) {
			objs, err := inf.Lister().List(labels.Everything())
			if err != nil {
				return nil, err
			}
			out := make([]*source.ListenerSet, 0, len(objs))
			for _, o := range objs {
				u, ok := o.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				ls, err := ListenerSetOf(u)
				if err != nil {
					return nil, err
				}
				out = append(out, ls)
			}
			return out, nil
		},
	}
}
