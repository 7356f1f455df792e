package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// eventSink turns new problems into Warning Events on their object (an
// Ingress or a Service of type LoadBalancer). The pipeline's ProblemBook says what is new and logs it;
// the API server's event correlation folds what repeats anyway.
type eventSink struct {
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
}

func newEventSink(client kubernetes.Interface) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &eventSink{
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pier-controller"}),
		broadcaster: b,
	}
}

// Report implements pipeline.ProblemSink.
func (e *eventSink) Report(_ context.Context, snap *source.Snapshot, fresh []model.Problem) {
	if len(fresh) == 0 {
		return
	}
	ingresses := map[model.ObjectRef]*networkingv1.Ingress{}
	for _, ing := range snap.Ingresses {
		ingresses[model.IngressRef(ing.Namespace, ing.Name)] = ing
	}
	services := serviceRefs(snap.Services)
	for _, p := range fresh {
		var obj runtime.Object
		switch p.Kind {
		case model.KindIngress:
			if ing := ingresses[p.Ref()]; ing != nil {
				obj = ing
			}
		case model.KindService:
			if svc := services[p.Ref()]; svc != nil {
				obj = svc
			}
		}
		if obj == nil {
			continue // a kind without Events yet, or gone meanwhile
		}
		msg := p.Message
		if p.Field != "" {
			msg = p.Field + ": " + msg
		}
		e.recorder.Event(obj, corev1.EventTypeWarning, p.Reason, msg)
	}
}

func (e *eventSink) shutdown() { e.broadcaster.Shutdown() }

// noIngresses serves the agent's API, which knows load balancers only.
type noIngresses struct{}

func (noIngresses) Ingress(string, string) (*networkingv1.Ingress, []model.Problem, bool) {
	return nil, nil, false
}
