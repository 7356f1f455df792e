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
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
)

// TLSRoute is v1 in the standard channel since Gateway API v1.5, and
// v1alpha3 and v1alpha2 in the experimental one beside it; the fields
// pier reads are the same in all three. pier's module (v1.4.1) has no
// v1 type, so TLSRoutes are read through the dynamic client at the
// newest version served, into the v1alpha2 type; their TypeMeta keeps
// the version read, which says where their status is written.

// TLSRouteVersions are the TLSRoute versions pier reads, newest first.
var TLSRouteVersions = []string{"v1", "v1alpha3", "v1alpha2"}

// TLSRouteResource is the TLSRoute resource at version.
func TLSRouteResource(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gwv1.GroupName, Version: version, Resource: "tlsroutes"}
}

// TLSRouteOf converts a TLSRoute read as unstructured, at any version.
func TLSRouteOf(u *unstructured.Unstructured) (*gwv1alpha2.TLSRoute, error) {
	var r gwv1alpha2.TLSRoute
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("tlsroute %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &r, nil
}

// UnstructuredTLSRoute is r at the version it was read at, for the
// dynamic client.
func UnstructuredTLSRoute(r *gwv1alpha2.TLSRoute) (*unstructured.Unstructured, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, fmt.Errorf("tlsroute %s/%s: %w", r.Namespace, r.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	if r.APIVersion == "" {
		u.SetAPIVersion(gwv1alpha2.GroupVersion.String())
	}
	u.SetKind("TLSRoute")
	return u, nil
}

// tlsRoutesUnwatched says why TLSRoutes cannot be watched at version
// ("" when they can).
func (w *gatewayWatch) tlsRoutesUnwatched(ctx context.Context, version string) string {
	gv := gwv1.GroupName + "/" + version
	list, err := w.discovery.ServerResourcesForGroupVersion(gv)
	if err != nil {
		return "discovery of " + gv + ": " + err.Error()
	}
	if !servesResource(list, "tlsroutes") {
		return gv + " does not serve tlsroutes"
	}
	_, err = w.dynamic.Resource(TLSRouteResource(version)).Namespace(w.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return "listing tlsroutes is forbidden: grant the controller the Gateway API rules of deploy/rbac.yaml"
	case err != nil:
		return "list tlsroutes: " + err.Error()
	}
	return ""
}

// tlsRouteWatch is the TLSRoute informer of the newest version served,
// its lister and what starts it; zero when none can be watched.
type tlsRouteWatch struct {
	version string
	watch   tcpRouteWatch // its informer and start
	list    func() ([]*gwv1alpha2.TLSRoute, error)
}

// watchTLSRoutes picks the newest TLSRoute version served and listable;
// a zero watch when none is (the log says why, once): the rest of the
// Gateway API is served without them.
func (w *gatewayWatch) watchTLSRoutes(ctx context.Context) tlsRouteWatch {
	if w.dynamic == nil {
		w.logger.Info("TLSRoutes are not served; the rest of the Gateway API is", "reason", "no dynamic client")
		return tlsRouteWatch{}
	}
	reasons := []any{}
	for _, version := range TLSRouteVersions {
		if reason := w.tlsRoutesUnwatched(ctx, version); reason != "" {
			reasons = append(reasons, version, reason)
			continue
		}
		f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(w.dynamic, 0, w.namespace, nil)
		inf := f.ForResource(TLSRouteResource(version))
		start := func() {
			f.Start(ctx.Done())
			go func() {
				<-ctx.Done()
				f.Shutdown()
			}()
		}
		return tlsRouteWatch{version: version, watch: tcpRouteWatch{informer: inf.Informer(), start: start},
			list: func() ([]*gwv1alpha2.TLSRoute, error) {
				objs, err := inf.Lister().List(labels.Everything())
				if err != nil {
					return nil, err
				}
				out := make([]*gwv1alpha2.TLSRoute, 0, len(objs))
				for _, o := range objs {
					u, ok := o.(*unstructured.Unstructured)
					if !ok {
						continue
					}
					r, err := TLSRouteOf(u)
					if err != nil {
						return nil, err
					}
					out = append(out, r)
				}
				return out, nil
			}}
	}
	w.logger.Info("TLSRoutes are not served; the rest of the Gateway API is", reasons...)
	return tlsRouteWatch{}
}
