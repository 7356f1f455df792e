// Package cluster runs pier against a Kubernetes API server: `pier
// controller` (informers → the shared pipeline → the LoadBalancer custom
// resource, leader-elected, writing Ingress status and Events) and `pier
// agent` (the node role on the custom resource).
package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"pier.dev/pier/internal/apiretry"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
)

// statusWriter writes status.loadBalancer of Ingresses of our class
// (Contour's writer): only when the value differs, retrying conflicts on a
// fresh read, never clearing status on shutdown.
type statusWriter struct {
	client kubernetes.Interface
	// gw writes the Gateway API's status (gatewaystatus.go); nil: none.
	gw gwclient.Interface
	// dyn writes the status of v1 TCPRoutes and UDPRoutes and of TLSRoutes, which gw's typed client
	// (Gateway API v1.4.1) does not know; nil: none are read either.
	dyn               dynamic.Interface
	gatewayController string
	logger            *slog.Logger

	mu sync.Mutex
	// written remembers the last value written per Ingress UID, so a
	// write the informer has not delivered yet is not repeated;
	// gwWritten the same for the Gateway API kinds.
	written   map[types.UID]writtenStatus
	gwWritten map[types.UID]gatewayWrite
	// gwListenerSets is the status.attachedListenerSets last written per
	// Gateway UID (listenersetstatus.go).
	gwListenerSets map[types.UID]int32
}

// writtenStatus is a status write and the resourceVersion it was made on:
// while the informer still shows that version, it has not delivered the
// write; once it shows another, the cache is the truth again (someone
// else may have changed the status since, and it must be restored).
type writtenStatus struct {
	addrs []networkingv1.IngressLoadBalancerIngress
	base  string
}

func newStatusWriter(client kubernetes.Interface, gw gwclient.Interface, gatewayController string, logger *slog.Logger) *statusWriter {
	return &statusWriter{client: client, gw: gw, gatewayController: gatewayController, logger: logger,
		written: map[types.UID]writtenStatus{}, gwWritten: map[types.UID]gatewayWrite{}, gwListenerSets: map[types.UID]int32{}}
}

// Current implements pipeline.StatusSink from the informer cache.
func (w *statusWriter) Current(snap *source.Snapshot) status.Published {
	out := status.Published{}
	if snap == nil {
		return out
	}
	for _, ing := range snap.Ingresses {
		if len(ing.Status.LoadBalancer.Ingress) > 0 {
			out[model.IngressRef(ing.Namespace, ing.Name)] = ing.Status.LoadBalancer.Ingress
		}
	}
	for ref, svc := range serviceRefs(snap.Services) {
		if len(svc.Status.LoadBalancer.Ingress) > 0 {
			out[ref] = fromService(svc.Status.LoadBalancer.Ingress)
		}
	}
	gatewayAddresses(snap, out)
	return out
}

// Publish implements pipeline.StatusSink, dispatching on the kind:
// Ingresses and Services here; Gateways, with their conditions, in
// PublishGateways. Objects not
// in ours (other classes) are never touched.
func (w *statusWriter) Publish(ctx context.Context, snap *source.Snapshot, ours map[model.ObjectRef]bool, next status.Published) error {
	ingresses := make(map[model.ObjectRef]*networkingv1.Ingress, len(snap.Ingresses))
	for _, ing := range snap.Ingresses {
		ingresses[model.IngressRef(ing.Namespace, ing.Name)] = ing
	}
	services := serviceRefs(snap.Services)
	var writes []func()
	for _, ref := range status.Keys(ours) {
		want := next[ref]
		switch ref.Kind {
		case model.KindIngress:
			if ing := ingresses[ref]; ing != nil && !status.Equal(ing.Status.LoadBalancer.Ingress, want) && !w.alreadyWritten(ing, want) {
				writes = append(writes, func() { w.publishIngress(ctx, ing, want) })
			}
		case model.KindService:
			if svc := services[ref]; svc != nil && w.serviceNeedsWrite(svc, want) {
				writes = append(writes, func() { w.publishService(ctx, svc, want) })
			}
		case model.KindGateway:
			// Written with its conditions by PublishGateways.
		default:
			w.logger.Debug("no status writer for this kind", "object", ref.String())
		}
	}
	runBounded(writes, statusWriters)
	return nil
}

// statusWriters bounds the status writes a pass makes at once. Each waits
// a round trip, and the pipeline runs its passes inline: one write at a
// time held the statuses of a cold start's thousand Ingresses to the API
// server's latency, and every change that came meanwhile with them. The
// client's rate limit (--kube-api-qps) still paces them.
const statusWriters = 16

// runBounded runs every job, at most n at once, and returns when all are
// done.
func runBounded(jobs []func(), n int) {
	if len(jobs) < 2 || n < 2 {
		for _, job := range jobs {
			job()
		}
		return
	}
	slots := make(chan struct{}, n)
	var wg sync.WaitGroup
	for _, job := range jobs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			job()
		}()
	}
	wg.Wait()
}

// publishIngress writes want into the Ingress's status; Publish has
// checked that it differs. Safe to run for several Ingresses at once.
func (w *statusWriter) publishIngress(ctx context.Context, ing *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress) {
	key := ing.Namespace + "/" + ing.Name
	if err := w.write(ctx, ing, want); err != nil {
		// One Ingress failing must not stop the others; the next pass
		// retries it.
		w.logger.Warn("could not write ingress status", "ingress", key, "error", err)
		return
	}
	w.logger.Info("ingress status updated", "ingress", key, "addresses", status.String(want))
}

func (w *statusWriter) alreadyWritten(cached *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress) bool {
	return w.alreadyWrittenUID(cached.UID, cached.ResourceVersion, want)
}

func (w *statusWriter) alreadyWrittenUID(uid types.UID, version string, want []networkingv1.IngressLoadBalancerIngress) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	got, ok := w.written[uid]
	return ok && got.base == version && status.Equal(got.addrs, want)
}

func (w *statusWriter) write(ctx context.Context, cached *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress) error {
	ingresses := w.client.NetworkingV1().Ingresses(cached.Namespace)
	return writeStatus(ctx, w, "ingress", cached, want, statusOps[*networkingv1.Ingress]{
		get: func(ctx context.Context) (*networkingv1.Ingress, error) {
			return ingresses.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		current: func(ing *networkingv1.Ingress) []networkingv1.IngressLoadBalancerIngress {
			return ing.Status.LoadBalancer.Ingress
		},
		set: func(ing *networkingv1.Ingress, want []networkingv1.IngressLoadBalancerIngress) {
			ing.Status.LoadBalancer.Ingress = want
		},
		update: func(ctx context.Context, ing *networkingv1.Ingress) error {
			_, err := ingresses.UpdateStatus(ctx, ing, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		},
	})
}

// statusOps are the kind-specific steps of writeStatus.
type statusOps[T statusObject] struct {
	get     func(context.Context) (T, error)
	current func(T) []networkingv1.IngressLoadBalancerIngress
	set     func(T, []networkingv1.IngressLoadBalancerIngress)
	update  func(context.Context, T) error
}

// statusObject is an Ingress or a Service: an API object that deep-copies
// itself.
type statusObject interface {
	metav1.Object
	runtime.Object
}

// writeStatus writes want into an object's status.loadBalancer: from the
// cached copy first (never mutated), from a fresh read after a conflict,
// refusing an object that was replaced meanwhile. It records what it
// wrote on which resource version, so that the echo of its own write is
// not written again.
func writeStatus[T statusObject](ctx context.Context, w *statusWriter, kind string, cached T,
	want []networkingv1.IngressLoadBalancerIngress, ops statusOps[T]) error {
	first, base := true, ""
	err := apiretry.OnConflict(retry.DefaultRetry, func() error {
		obj := cached.DeepCopyObject().(T)
		base = ""
		if !first {
			fresh, err := ops.get(ctx)
			if err != nil {
				return err
			}
			if fresh.GetUID() != cached.GetUID() {
				return fmt.Errorf("%s was replaced", kind)
			}
			obj = fresh
		}
		first = false
		if status.Equal(ops.current(obj), want) {
			return nil
		}
		ops.set(obj, want)
		base = obj.GetResourceVersion()
		return ops.update(ctx, obj)
	})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile
	}
	if err != nil || base == "" {
		return err
	}
	w.mu.Lock()
	w.written[cached.GetUID()] = writtenStatus{addrs: want, base: base}
	w.mu.Unlock()
	return nil
}

func metaFor(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
