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
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/translate"
)

// A ListenerSet's status is written at v1 through the dynamic client,
// with its listeners; its Gateway's status carries
// attachedListenerSets, which the typed v1.4.1 client cannot write, and
// a second pass with nothing new writes nothing.
func TestListenerSetStatusWritten(t *testing.T) {
	ctx := context.Background()
	ls := &unstructured.Unstructured{}
	ls.SetAPIVersion("gateway.networking.k8s.io/v1")
	ls.SetKind("ListenerSet")
	ls.SetNamespace("team")
	ls.SetName("ls")
	ls.SetUID("ls1")
	ls.SetGeneration(2)
	if err := unstructured.SetNestedMap(ls.Object, map[string]any{"name": "gw", "namespace": "default"}, "spec", "parentRef"); err != nil {
		t.Fatal(err)
	}
	gw := &gwv1.Gateway{TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw", UID: "gw1", Generation: 1}}
	gwU := &unstructured.Unstructured{}
	gwU.SetAPIVersion("gateway.networking.k8s.io/v1")
	gwU.SetKind("Gateway")
	gwU.SetNamespace("default")
	gwU.SetName("gw")
	gwU.SetUID("gw1")
	gvrGateway := gwv1.SchemeGroupVersion.WithResource("gateways")
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{sourcekube.ListenerSetV1: "ListenerSetList", gvrGateway: "GatewayList"}, ls)
	cached, err := sourcekube.ListenerSetOf(ls)
	if err != nil {
		t.Fatal(err)
	}
	// Created, not given to the constructor: its tracker would guess the
	// resource "gatewaies".
	if _, err := dyn.Resource(gvrGateway).Namespace("default").Create(ctx, gwU, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := newStatusWriter(fake.NewClientset(), gwfake.NewSimpleClientset(gw), ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.dyn = dyn
	gwRef := model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}
	lsRef := model.ObjectRef{Kind: model.KindListenerSet, Namespace: "team", Name: "ls"}
	accepted := metav1.Condition{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 2}
	st := &translate.GatewayStatus{
		Gateways: map[model.ObjectRef]gwv1.GatewayStatus{gwRef: {Conditions: []metav1.Condition{
			{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: 1}}}},
		ListenerSets: map[model.ObjectRef]translate.ListenerSetStatus{lsRef: {Gateway: gwRef,
			Conditions: []metav1.Condition{accepted},
			Listeners: []gwv1.ListenerStatus{{Name: "l", AttachedRoutes: 3, SupportedKinds: []gwv1.RouteGroupKind{{Kind: "HTTPRoute"}},
				Conditions: []metav1.Condition{accepted}}}}},
		AttachedListenerSets: map[model.ObjectRef]int32{gwRef: 1},
	}
	snap := &source.Snapshot{Gateways: []*gwv1.Gateway{gw}, ListenerSets: []*source.ListenerSet{cached}}
	if err := w.PublishGateways(ctx, snap, st); err != nil {
		t.Fatal(err)
	}
	got, err := dyn.Resource(sourcekube.ListenerSetV1).Namespace("team").Get(ctx, "ls", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	written, err := sourcekube.ListenerSetOf(got)
	if err != nil {
		t.Fatal(err)
	}
	if cs := written.Status.Conditions; len(cs) != 1 || cs[0].Reason != "Accepted" || cs[0].LastTransitionTime.IsZero() {
		t.Errorf("conditions %+v, want Accepted, dated", cs)
	}
	if ls := written.Status.Listeners; len(ls) != 1 || ls[0].Name != "l" || ls[0].AttachedRoutes != 3 || len(ls[0].SupportedKinds) != 1 {
		t.Errorf("listeners %+v", ls)
	}
	gotGW, err := dyn.Resource(gvrGateway).Namespace("default").Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, found, _ := unstructured.NestedInt64(gotGW.Object, "status", "attachedListenerSets"); !found || n != 1 {
		t.Errorf("Gateway attachedListenerSets %d (found %v), want 1", n, found)
	}
	// The Gateway's count changes alone: it is written again.
	st.AttachedListenerSets[gwRef] = 0
	writes := len(dyn.Actions())
	if err := w.PublishGateways(ctx, snap, st); err != nil {
		t.Fatal(err)
	}
	gotGW, err = dyn.Resource(gvrGateway).Namespace("default").Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := unstructured.NestedInt64(gotGW.Object, "status", "attachedListenerSets"); n != 0 {
		t.Errorf("Gateway attachedListenerSets %d after the change, want 0", n)
	}
	if len(dyn.Actions()) == writes {
		t.Error("a new attachedListenerSets alone was not written")
	}
}
