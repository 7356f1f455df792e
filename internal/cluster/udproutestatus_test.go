package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
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
