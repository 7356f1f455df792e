package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/translate"
)

// publishUDPRoutes writes the status parents of the UDPRoutes that are
// ours, or were (their stale entries go).
func (w *statusWriter) publishUDPRoutes(ctx context.Context, snap *source.Snapshot, st *translate.GatewayStatus,
	controller gwv1.GatewayController, now metav1.Time) {
	for _, r := range snap.UDPRoutes {
		want := st.Routes[gatewayRef(model.KindUDPRoute, r.Namespace, r.Name)]
		if want == nil && !hasParentOf(r.Status.Parents, controller) {
			continue
		}
		wrote, err := w.writeUDPRoute(ctx, r, want, controller, now)
		w.report("udproute", r.Namespace+"/"+r.Name, wrote, err)
	}
}

// writeUDPRoute writes a UDPRoute's parents at the version it was read
// at: v1 through the dynamic client (sourcekube.UDPRouteV1), v1alpha2
// through the typed one.
func (w *statusWriter) writeUDPRoute(ctx context.Context, cached *gwv1alpha2.UDPRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	if cached.APIVersion == gwv1.GroupVersion.String() {
		if w.dyn == nil {
			return false, fmt.Errorf("a v1 UDPRoute and no dynamic client to write it")
		}
		routes := w.dyn.Resource(sourcekube.UDPRouteV1).Namespace(cached.Namespace)
		return writeMerged(ctx, w, cached, want,
			func(ctx context.Context) (*gwv1alpha2.UDPRoute, error) {
				u, err := routes.Get(ctx, cached.Name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return sourcekube.UDPRouteOf(u)
			},
			func(r *gwv1alpha2.UDPRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
			func(ctx context.Context, r *gwv1alpha2.UDPRoute) error {
				u, err := sourcekube.UnstructuredUDPRoute(r)
				if err == nil {
					_, err = routes.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pier"})
				}
				return err
			})
	}
	routes := w.gw.GatewayV1alpha2().UDPRoutes(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1alpha2.UDPRoute, error) {
			return routes.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(r *gwv1alpha2.UDPRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
		func(ctx context.Context, r *gwv1alpha2.UDPRoute) error {
			_, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}
