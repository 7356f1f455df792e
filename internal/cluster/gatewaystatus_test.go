package cluster

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/reference"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/gatewayfeatures"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/translate"
)

const ourController = translate.DefaultGatewayControllerName

// The writer replaces the class's CRD default Accepted=Unknown, makes a
// served Gateway Programmed with its addresses, writes the route's entry
// for our Gateway beside another controller's (kept as it was), retries a
// conflict on a fresh read, and writes nothing the second time.
func TestGatewayStatusWritten(t *testing.T) {
	ctx := context.Background()
	epoch := metav1.NewTime(time.Unix(0, 0).UTC())
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "pier", UID: "c1", Generation: 1},
		Spec: gwv1.GatewayClassSpec{ControllerName: ourController},
		Status: gwv1.GatewayClassStatus{Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionUnknown,
			Reason: "Pending", Message: "Waiting for controller", LastTransitionTime: epoch}}}}
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw", UID: "g1", Generation: 2},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	theirs := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "their-gw"}, ControllerName: "example.com/other",
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", LastTransitionTime: epoch}}}
	route := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "r", UID: "r1", Generation: 1}}
	route.Status.Parents = []gwv1.RouteParentStatus{theirs}
	foreign := &gwv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foreign", UID: "r2"}}
	client := gwfake.NewSimpleClientset()
	mustCreate(t, func() error {
		_, err := client.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := client.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, func() error {
		_, err := client.GatewayV1().HTTPRoutes("default").Create(ctx, route, metav1.CreateOptions{})
		return err
	})
	conflicts := 0
	client.PrependReactor("update", "httproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicts == 0 {
			conflicts++
			return true, nil, apierrors.NewConflict(schema.GroupResource{Resource: "httproutes"}, "r", nil)
		}
		return false, nil, nil
	})
	w := newStatusWriter(fake.NewClientset(), client, ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))

	gwRef := model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}
	ours := gwv1.RouteParentStatus{ParentRef: gwv1.ParentReference{Name: "gw"}, ControllerName: ourController,
		Conditions: []metav1.Condition{{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}
	st := &translate.GatewayStatus{
		Classes: map[string][]metav1.Condition{"pier": {{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}},
		Gateways: map[model.ObjectRef]gwv1.GatewayStatus{gwRef: {Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 2},
			{Type: "Programmed", Status: metav1.ConditionFalse, Reason: "Pending", ObservedGeneration: 2},
		}}},
		Routes: map[model.ObjectRef][]gwv1.RouteParentStatus{{Kind: model.KindHTTPRoute, Namespace: "default", Name: "r"}: {ours}},
	}
	final := status.Gateways(st, status.Published{gwRef: {{IP: "10.0.0.1"}}})
	snap := &source.Snapshot{GatewayClasses: []*gwv1.GatewayClass{class}, Gateways: []*gwv1.Gateway{gw},
		HTTPRoutes: []*gwv1.HTTPRoute{route, foreign}}
	if err := w.PublishGateways(ctx, snap, final); err != nil {
		t.Fatal(err)
	}

	gotClass, _ := client.GatewayV1().GatewayClasses().Get(ctx, "pier", metav1.GetOptions{})
	if cs := gotClass.Status.Conditions; len(cs) != 1 || cs[0].Status != metav1.ConditionTrue || cs[0].ObservedGeneration != 1 ||
		cs[0].LastTransitionTime.IsZero() || cs[0].LastTransitionTime.Equal(&epoch) {
		t.Errorf("class conditions %+v, want Accepted=True alone, dated now", cs)
	}
	var features []string
	for _, f := range gotClass.Status.SupportedFeatures {
		features = append(features, string(f.Name))
	}
	if want := gatewayfeatures.Supported(); !slices.Equal(features, want) {
		t.Errorf("class supportedFeatures %v, want %v (sorted)", features, want)
	}
	gotGW, _ := client.GatewayV1().Gateways("default").Get(ctx, "gw", metav1.GetOptions{})
	if len(gotGW.Status.Addresses) != 1 || gotGW.Status.Addresses[0].Value != "10.0.0.1" ||
		gotGW.Status.Conditions[1].Type != "Programmed" || gotGW.Status.Conditions[1].Status != metav1.ConditionTrue {
		t.Errorf("gateway status %+v", gotGW.Status)
	}
	if cur := w.Current(&source.Snapshot{Gateways: []*gwv1.Gateway{gotGW}}); !status.Equal(cur[gwRef], status.FromGatewayAddresses(final.Gateways[gwRef].Addresses)) {
		t.Errorf("Current %+v", cur)
	}
	gotRoute, _ := client.GatewayV1().HTTPRoutes("default").Get(ctx, "r", metav1.GetOptions{})
	ps := gotRoute.Status.Parents
	if conflicts != 1 || len(ps) != 2 || !status.SameGatewayAPIStatus(ps[0], theirs) || ps[1].ControllerName != ourController {
		t.Errorf("route parents %+v after %d conflicts, want theirs untouched then ours", ps, conflicts)
	}
	gotForeign, _ := client.GatewayV1().HTTPRoutes("default").Get(ctx, "foreign", metav1.GetOptions{})
	if gotForeign != nil && len(gotForeign.Status.Parents) != 0 {
		t.Errorf("a route not ours got a status: %+v", gotForeign.Status)
	}

	// The informers have not delivered the writes yet (the same cached
	// objects): the same status is not written again.
	client.ClearActions()
	if err := w.PublishGateways(ctx, snap, final); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		t.Errorf("publish before the informers delivered the writes made a call: %v", a)
	}
	// The informers now show the writes: publishing again writes nothing.
	client.ClearActions()
	snap = &source.Snapshot{GatewayClasses: []*gwv1.GatewayClass{gotClass}, Gateways: []*gwv1.Gateway{gotGW},
		HTTPRoutes: []*gwv1.HTTPRoute{gotRoute, foreign}}
	if err := w.PublishGateways(ctx, snap, final); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		t.Errorf("no-op publish made a call: %v", a)
	}
}

func mustCreate(t *testing.T, f func() error) {
	t.Helper()
	if err := f(); err != nil {
		t.Fatal(err)
	}
}

// Warning Events can name Gateway API objects: the recorder finds their
// kind in its scheme (informer objects carry none).
func TestEventSchemeKnowsGatewayAPI(t *testing.T) {
	s := eventScheme()
	for _, obj := range []runtime.Object{&gwv1.GatewayClass{}, &gwv1.Gateway{}, &gwv1.HTTPRoute{}} {
		r, err := reference.GetReference(s, obj)
		if err != nil || r.APIVersion != "gateway.networking.k8s.io/v1" {
			t.Errorf("%T: reference %+v, %v", obj, r, err)
		}
	}
}
