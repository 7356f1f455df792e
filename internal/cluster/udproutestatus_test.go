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
	"k8s.io/client-go/tools/reference"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/translate"
)

// A UDPRoute's entry for our Gateway is written beside another
// controller's; one that names no Gateway of ours gets none, and one that
// no longer does loses ours.
func TestUDPRouteStatusWritten(t *testing.T) {
	ctx := context.Background()
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "their-gw"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	route := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "u", UID: "u1", Generation: 1}}
	route.Status.Parents = []gwv1.RouteParentStatus{theirs}
	foreign := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foreign", UID: "u2"}}
	stale := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stale", UID: "u3"}}
	stale.Status.Parents = []gwv1.RouteParentStatus{ours}
	client := gwfake.NewSimpleClientset()
	for _, r := range []*gwv1alpha2.UDPRoute{route, foreign, stale} {
		mustCreate(t, func() error {
			_, err := client.GatewayV1alpha2().UDPRoutes("default").Create(ctx, r, metav1.CreateOptions{})
			return err
		})
	}
	w := newStatusWriter(fake.NewClientset(), client, ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
		{Kind: model.KindUDPRoute, Namespace: "default", Name: "u"}: {ours},
		// A TCPRoute of the same name is another object.
		{Kind: model.KindTCPRoute, Namespace: "default", Name: "foreign"}: {ours},
	}}
	if err := w.PublishGateways(ctx, &source.Snapshot{UDPRoutes: []*gwv1alpha2.UDPRoute{route, foreign, stale}}, st); err != nil {
		t.Fatal(err)
	}
	got, _ := client.GatewayV1alpha2().UDPRoutes("default").Get(ctx, "u", metav1.GetOptions{})
	if ps := got.Status.Parents; len(ps) != 2 || ps[0].ControllerName != theirs.ControllerName || ps[1].ControllerName != ourController ||
		ps[1].Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("parents %+v, want theirs then ours, dated", ps)
	}
	if got, _ := client.GatewayV1alpha2().UDPRoutes("default").Get(ctx, "foreign", metav1.GetOptions{}); len(got.Status.Parents) != 0 {
		t.Errorf("a UDPRoute not ours got a status: %+v", got.Status)
	}
	if got, _ := client.GatewayV1alpha2().UDPRoutes("default").Get(ctx, "stale", metav1.GetOptions{}); len(got.Status.Parents) != 0 {
		t.Errorf("a UDPRoute no longer ours keeps our entry: %+v", got.Status)
	}
}

// A UDPRoute read at v1 (the standard channel since Gateway API v1.7,
// through the dynamic client) gets its entry written at v1, beside
// another controller's.
func TestUDPRouteV1StatusWritten(t *testing.T) {
	ctx := context.Background()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("UDPRoute")
	u.SetNamespace("default")
	u.SetName("u")
	u.SetUID("u1")
	u.SetGeneration(1)
	theirs := map[string]any{"parentRef": map[string]any{"name": "their-gw"}, "controllerName": "example.com/other",
		"conditions": []any{map[string]any{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
			"lastTransitionTime": "2026-01-02T03:04:05Z"}}}
	if err := unstructured.SetNestedSlice(u.Object, []any{theirs}, "status", "parents"); err != nil {
		t.Fatal(err)
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sourcekube.UDPRouteV1: "UDPRouteList"}, u)
	cached, err := sourcekube.UDPRouteOf(u)
	if err != nil {
		t.Fatal(err)
	}
	// The typed client holds no UDPRoute: a write at v1alpha2 would fail.
	typed := gwfake.NewSimpleClientset()
	w := newStatusWriter(fake.NewClientset(), typed, ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.dyn = dyn
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
		{Kind: model.KindUDPRoute, Namespace: "default", Name: "u"}: {ours},
	}}
	if err := w.PublishGateways(ctx, &source.Snapshot{UDPRoutes: []*gwv1alpha2.UDPRoute{cached}}, st); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(sourcekube.UDPRouteV1).Namespace("default").Get(ctx, "u", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sourcekube.UDPRouteOf(got)
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
	for _, a := range typed.Actions() {
		t.Errorf("the typed v1alpha2 client was called: %v", a)
	}
}

// Warning Events can name a UDPRoute at the version it was read at: v1
// (its TypeMeta says so) and v1alpha2 (a typed informer's object, which
// carries none: the recorder's scheme knows its kind).
func TestEventReferencesUDPRoute(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("UDPRoute")
	u.SetNamespace("default")
	u.SetName("u")
	v1, err := sourcekube.UDPRouteOf(u)
	if err != nil {
		t.Fatal(err)
	}
	alpha := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "u"}}
	for _, c := range []struct {
		obj  *gwv1alpha2.UDPRoute
		want string
	}{{v1, "gateway.networking.k8s.io/v1"}, {alpha, "gateway.networking.k8s.io/v1alpha2"}} {
		r, err := reference.GetReference(eventScheme(), c.obj)
		if err != nil || r.APIVersion != c.want || r.Kind != "UDPRoute" || r.Name != "u" {
			t.Errorf("reference %+v, %v; want a UDPRoute at %s", r, err, c.want)
		}
	}
}
