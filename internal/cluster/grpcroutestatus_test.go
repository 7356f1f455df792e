package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// A GRPCRoute's entry for our Gateway is written beside another
// controller's, as an HTTPRoute's; one that names no Gateway of ours
// gets none.
func TestGRPCRouteStatusWritten(t *testing.T) {
	ctx := context.Background()
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "their-gw"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: metav1.Now().Rfc3339Copy()}}}
	route := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g", UID: "g1", Generation: 1}}
	route.Status.Parents = []gwv1.RouteParentStatus{theirs}
	foreign := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foreign", UID: "g2"}}
	client := gwfake.NewSimpleClientset()
	for _, r := range []*gwv1.GRPCRoute{route, foreign} {
		mustCreate(t, func() error {
			_, err := client.GatewayV1().GRPCRoutes("default").Create(ctx, r, metav1.CreateOptions{})
			return err
		})
	}
	w := newStatusWriter(fake.NewClientset(), client, ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	st := &translate.GatewayStatus{Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{
		{Kind: model.KindGRPCRoute, Namespace: "default", Name: "g"}: {ours},
		// An HTTPRoute of the same name is another object.
		{Kind: model.KindHTTPRoute, Namespace: "default", Name: "foreign"}: {ours},
	}}
	if err := w.PublishGateways(ctx, &source.Snapshot{GRPCRoutes: []*gwv1.GRPCRoute{route, foreign}}, st); err != nil {
		t.Fatal(err)
	}
	got, _ := client.GatewayV1().GRPCRoutes("default").Get(ctx, "g", metav1.GetOptions{})
	if ps := got.Status.Parents; len(ps) != 2 || ps[0].ControllerName != theirs.ControllerName || ps[1].ControllerName != ourController ||
		ps[1].Conditions[0].LastTransitionTime.IsZero() {
		t.Errorf("parents %+v, want theirs then ours, dated", ps)
	}
	gotForeign, _ := client.GatewayV1().GRPCRoutes("default").Get(ctx, "foreign", metav1.GetOptions{})
	if len(gotForeign.Status.Parents) != 0 {
		t.Errorf("a GRPCRoute not ours got a status: %+v", gotForeign.Status)
	}
}
