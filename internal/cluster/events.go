package cluster

import (
	"context"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/source"
)

// eventSink logs each problem once and turns it into a Warning Event on
// its Ingress. The API server's event correlation folds repeats.
type eventSink struct {
	log         pipeline.ProblemLog
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster

	mu       sync.RWMutex
	snap     *source.Snapshot
	problems map[string][]model.Problem // the last set, by Ingress, for the API
}

func newEventSink(client kubernetes.Interface, logger *slog.Logger) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &eventSink{
		log:         pipeline.ProblemLog{Logger: logger},
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "pier-controller"}),
		broadcaster: b,
	}
}

// Report implements pipeline.ProblemSink.
func (e *eventSink) Report(_ context.Context, snap *source.Snapshot, problems []model.Problem) {
	byKey := map[string]*networkingv1.Ingress{}
	for _, ing := range snap.Ingresses {
		byKey[ing.Namespace+"/"+ing.Name] = ing
	}
	byIngress := map[string][]model.Problem{}
	for _, p := range problems {
		if p.Kind == "Ingress" {
			byIngress[p.Namespace+"/"+p.Name] = append(byIngress[p.Namespace+"/"+p.Name], p)
		}
	}
	e.mu.Lock()
	e.snap, e.problems = snap, byIngress
	e.mu.Unlock()
	for _, p := range e.log.New(problems) {
		ing := byKey[p.Namespace+"/"+p.Name]
		if p.Kind != "Ingress" || ing == nil {
			continue
		}
		msg := p.Message
		if p.Field != "" {
			msg = p.Field + ": " + msg
		}
		e.recorder.Event(ing, corev1.EventTypeWarning, p.Reason, msg)
	}
}

func (e *eventSink) shutdown() { e.broadcaster.Shutdown() }

// Ingress implements api.Ingresses from the informer cache: the status is
// what the API server holds.
func (e *eventSink) Ingress(namespace, name string) (*networkingv1.Ingress, []model.Problem, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.snap == nil {
		return nil, nil, false
	}
	for _, ing := range e.snap.Ingresses {
		if ing.Namespace == namespace && ing.Name == name {
			out := ing.DeepCopy()
			out.APIVersion, out.Kind = "networking.k8s.io/v1", "Ingress"
			return out, append([]model.Problem(nil), e.problems[namespace+"/"+name]...), true
		}
	}
	return nil, nil, false
}

// noIngresses serves the agent's API, which knows load balancers only.
type noIngresses struct{}

func (noIngresses) Ingress(string, string) (*networkingv1.Ingress, []model.Problem, bool) {
	return nil, nil, false
}
