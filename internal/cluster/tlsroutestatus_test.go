package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/translate"
)

// A TLSRoute gets its entry for our Gateway written at the version it
// was read at (v1, the standard channel since Gateway API v1.5, or an
// experimental one), beside another controller's.
func TestTLSRouteStatusWritten(t *testing.T) {
	for _, version := range sourcekube.TLSRouteVersions {
		t.Run(version, func(t *testing.T) {
			ctx := context.Background()
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("gateway.networking.k8s.io/" + version)
			u.SetKind("TLSRoute")
			u.SetNamespace("default")
			u.SetName("t")
			u.SetUID("t1")
			u.SetGeneration(1)
			theirs := map[string]any{"parentRef": map[string]any{"name": "their-gw"}, "controllerName": "example.com/other",
				"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
					"lastTransitionTime": "2026-01-02T03:04:05Z"}}}
			if err := unstructured.SetNestedSlice(u.Object, []any{theirs}, "status", "parents"); err != nil {
				t.Fatal(err)
			}
			gvr := sourcekube.TLSRouteResource(version)
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gvr: "TLSRouteList"}, u)
			cached, err := sourcekube.TLSRouteOf(u)
			if err != nil {
				t.Fatal(err)
			}
			w := newStatusWriter(fake.NewClientset(), gwfake.NewSimpleClientset(), ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
			w.dyn = dyn
			ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
				Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
			st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
				{Kind: model.KindTLSRoute, Namespace: "default", Name: "t"}: {ours},
			}}
			if err := w.PublishGateways(ctx, &source.Snapshot{TLSRoutes: []*gwv1alpha2.TLSRoute{cached}}, st); err != nil {
				t.Fatal(err)
			}
			got, err := dyn.Resource(gvr).Namespace("default").Get(ctx, "t", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			r, err := sourcekube.TLSRouteOf(got)
			if err != nil {
				t.Fatal(err)
			}
			if ps := r.Status.Parents; len(ps) != 2 || ps[0].ControllerName != "example.com/other" || ps[1].ControllerName != ourController ||
				ps[1].Conditions[0].LastTransitionTime.IsZero() {
				t.Errorf("parents %+v, want theirs then ours, dated", ps)
			}
			if got.GetAPIVersion() != "gateway.networking.k8s.io/"+version {
				t.Errorf("written as %s", got.GetAPIVersion())
			}
		})
	}
}
