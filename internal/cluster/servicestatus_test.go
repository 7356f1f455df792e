package cluster

import (
	"context"
	"io"
	"log/slog"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
)

// TestServiceStatusWritten: the writer puts the addresses into a native
// Service's status.loadBalancer.ingress once, skips the no-op write, and
// never touches a Service that is not ours.
func TestServiceStatusWritten(t *testing.T) {
	ours := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "dns", UID: "u1", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	theirs := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "other", UID: "u2", ResourceVersion: "1"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	client := fake.NewSimpleClientset(ours, theirs)
	w := newStatusWriter(client, nil, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	ref := model.ObjectRef{Kind: model.KindService, Namespace: "shop", Name: "dns"}
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "10.98.200.1"}, {IP: "203.0.113.7"}}
	snap := &source.Snapshot{Services: []*corev1.Service{ours, theirs}}
	next := status.Published{ref: want}
	if err := w.Publish(context.Background(), snap, map[model.ObjectRef]bool{ref: true}, next); err != nil {
		t.Fatal(err)
	}
	got, err := client.CoreV1().Services("shop").Get(context.Background(), "dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !status.Equal(fromService(got.Status.LoadBalancer.Ingress), want) {
		t.Fatalf("status %+v", got.Status.LoadBalancer.Ingress)
	}
	// The informer now shows the write: publishing again writes nothing.
	client.ClearActions()
	if err := w.Publish(context.Background(), &source.Snapshot{Services: []*corev1.Service{got, theirs}},
		map[model.ObjectRef]bool{ref: true}, next); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if _, ok := a.(k8stesting.UpdateAction); ok {
			t.Fatalf("no-op publish wrote: %v", a)
		}
	}
	if cur := w.Current(&source.Snapshot{Services: []*corev1.Service{got}}); !status.Equal(cur[ref], want) {
		t.Fatalf("Current = %v", cur)
	}
	other, _ := client.CoreV1().Services("shop").Get(context.Background(), "other", metav1.GetOptions{})
	if len(other.Status.LoadBalancer.Ingress) != 0 {
		t.Fatal("a Service not ours got a status")
	}
}
