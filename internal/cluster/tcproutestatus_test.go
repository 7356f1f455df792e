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

// A TCPRoute's entry for our Gateway is written beside another
// controller's (v1alpha2, the same RouteStatus as an HTTPRoute's); one
// that names no Gateway of ours gets none.
func TestTCPRouteStatusWritten(t *testing.T) {
	ctx := context.Background()
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "their-gw"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
	route := &gwv1alpha2.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t", UID: "t1", Generation: 1}}
	route.Status.Parents = []gwv1.RouteParentStatus{theirs}
	foreign := &gwv1alpha2.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foreign", UID: "t2"}}
	client := gwfake.NewSimpleClientset()
	for _, r := range []*gwv1alpha2.TCPRoute{route, foreign} {
		mustCreate(t, func() error {
			_, err := client.GatewayV1alpha2().TCPRoutes("default").Create(ctx, r, metav1.CreateOptions{})
			return err
		})
	}
	w := newStatusWriter(fake.NewClientset(), client, ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
		{Kind: model.KindTCPRoute, Namespace: "default", Name: "t"}: {ours},
		// A GRPCRoute of the same name is another object.
		{Kind: model.KindGRPCRoute, Namespace: "default", Name: "foreign"}: {ours},
	}}
	if err := w.PublishGateways(ctx, &source.Snapshot{TCPRoutes: []*gwv1alpha2.TCPRoute{route, foreign}}, st); err != nil {
		t.Fatal(err)
	}
	got, _ := client.GatewayV1alpha2().TCPRoutes("default").Get(ctx, "t", metav1.GetOptions{})
	if ps := got.Status.Parents; len(ps) != 2 || ps[0].ControllerName != theirs.ControllerName || ps[1].ControllerName != ourController ||
		ps[1].Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("parents %+v, want theirs then ours, dated", ps)
	}
	gotForeign, _ := client.GatewayV1alpha2().TCPRoutes("default").Get(ctx, "foreign", metav1.GetOptions{})
	if len(gotForeign.Status.Parents) != 0 {
		t.Errorf("a TCPRoute not ours got a status: %+v", gotForeign.Status)
	}
}

// A TCPRoute read at v1 (the standard channel since Gateway API v1.6,
// through the dynamic client) gets its entry written at v1, beside
// another controller's.
func TestTCPRouteV1StatusWritten(t *testing.T) {
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("TCPRoute")
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
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sourcekube.TCPRouteV1: "TCPRouteList"}, u)
	cached, err := sourcekube.TCPRouteOf(u)
	if err != nil {
		t.Fatal(err)
	}
	w := newStatusWriter(fake.NewClientset(), gwfake.NewSimpleClientset(), ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.dyn = dyn
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
		{Kind: model.KindTCPRoute, Namespace: "default", Name: "t"}: {ours},
	}}
	if err := w.PublishGateways(ctx, &source.Snapshot{TCPRoutes: []*gwv1alpha2.TCPRoute{cached}}, st); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(sourcekube.TCPRouteV1).Namespace("default").Get(ctx, "t", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sourcekube.TCPRouteOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if ps := r.Status.Parents; len(ps) != 2 || ps[0].ControllerName != "example.com/other" || ps[1].ControllerName != ourController ||
		ps[1].Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("parents %+v, want theirs then ours, dated", ps)
	}
	if got.GetAPIVersion() != "gateway.networking.k8s.io/v1" {
		t.Errorf("written as %s", got.GetAPIVersion())
	}
}
