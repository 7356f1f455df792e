package cluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
)

// TestIngressStatusesWrittenSeveralAtOnce: a pass with many statuses to
// write writes every one (runBounded runs them several at once; the fake
// client serialises its calls, so TestRunBounded shows that), and an
// Ingress whose status is already right is not written.
func TestIngressStatusesWrittenSeveralAtOnce(t *testing.T) {
	const n = 48
	want := []networkingv1.IngressLoadBalancerIngress{{IP: "10.98.200.1"}}
	var objs []runtime.Object
	snap := &source.Snapshot{}
	ours := map[model.ObjectRef]bool{}
	next := status.Published{}
	for i := range n + 1 {
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%02d", i),
			UID: types.UID(fmt.Sprint("u", i)), ResourceVersion: "1"}}
		if i == n {
			ing.Status.LoadBalancer.Ingress = want // already right
		}
		objs = append(objs, ing)
		snap.Ingresses = append(snap.Ingresses, ing)
		ref := model.IngressRef(ing.Namespace, ing.Name)
		ours[ref], next[ref] = true, want
	}
	client := fake.NewSimpleClientset(objs...)
	var mu sync.Mutex
	writes := 0
	client.PrependReactor("update", "ingresses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		writes++
		mu.Unlock()
		return false, nil, nil // the tracker stores it
	})
	w := newStatusWriter(client, nil, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := w.Publish(context.Background(), snap, ours, next); err != nil {
		t.Fatal(err)
	}
	if writes != n {
		t.Fatalf("%d status writes, want %d (the Ingress already right is not written)", writes, n)
	}
	for _, ing := range snap.Ingresses {
		got, err := client.NetworkingV1().Ingresses("shop").Get(context.Background(), ing.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !status.Equal(got.Status.LoadBalancer.Ingress, want) {
			t.Fatalf("%s: status %v, want %v", ing.Name, got.Status.LoadBalancer.Ingress, want)
		}
	}
}

// TestRunBounded: every job runs, several at once, never more than the
// bound.
func TestRunBounded(t *testing.T) {
	const jobs, bound = 40, 6
	var mu sync.Mutex
	inflight, most, ran := 0, 0, 0
	var list []func()
	for range jobs {
		list = append(list, func() {
			mu.Lock()
			inflight++
			ran++
			most = max(most, inflight)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // a round trip
			mu.Lock()
			inflight--
			mu.Unlock()
		})
	}
	runBounded(list, bound)
	if ran != jobs {
		t.Fatalf("%d jobs ran, want %d", ran, jobs)
	}
	if most < 2 || most > bound {
		t.Fatalf("at most %d jobs at once, want between 2 and %d", most, bound)
	}
}
