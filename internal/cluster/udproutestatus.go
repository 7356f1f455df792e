package cluster

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
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

// writeUDPRoute writes a UDPRoute's parents (v1alpha2, the only version
// served).
func (w *statusWriter) writeUDPRoute(ctx context.Context, cached *gwv1alpha2.UDPRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
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
