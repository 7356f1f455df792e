package cluster

import (
	"context"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// watchCordon follows this node's spec.unschedulable until ctx ends and
// calls drain on every change: `kubectl cordon` is how an operator asks
// for a planned handover (the controller, seeing the same cordon, gives
// the node no new load balancer). The informer watches this one Node, so
// the agent caches nothing of the others.
func watchCordon(ctx context.Context, client kubernetes.Interface, node string, drain func(on bool), logger *slog.Logger) error {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", node).String()
	}))
	defer factory.Shutdown()
	// Handlers of one informer run one at a time: cordoned needs no lock.
	cordoned := false
	follow := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || n.Name != node || n.Spec.Unschedulable == cordoned {
			return
		}
		cordoned = n.Spec.Unschedulable
		if cordoned {
			logger.Info("node cordoned: draining, handing the addresses this node holds to their standby nodes")
		} else {
			logger.Info("node uncordoned: no longer draining")
		}
		drain(cordoned)
	}
	_, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    follow,
		UpdateFunc: func(_, cur any) { follow(cur) },
	})
	if err != nil {
		return fmt.Errorf("watch node %s: %w", node, err)
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	return nil
}
