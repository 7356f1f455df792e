package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// eventSink turns new problems into Warning Events on their object (an
// Ingress, a Service of type LoadBalancer, a GatewayClass, Gateway or
// HTTPRoute). The pipeline's ProblemBook says what is new and logs it;
// the API server's event correlation folds what repeats anyway.
type eventSink struct {
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster
}

func newEventSink(client kubernetes.Interface) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &eventSink{
		recorder:    b.NewRecorder(eventScheme(), corev1.EventSource{Component: "pier-controller"}),
		broadcaster: b,
	}
}

// eventScheme names the kinds Events are about: client-go's, and the
// Gateway API's v1 and v1alpha2 (informer objects carry no apiVersion and kind, the
// recorder looks them up here).
func eventScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(scheme.AddToScheme(s))
	utilruntime.Must(gwv1.Install(s))
	// The v1alpha2 UDPRoutes and TCPRoutes of the typed informers.
	utilruntime.Must(gwv1alpha2.Install(s))
	return s
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
	gateway := gatewayObjects(snap)
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
		case model.KindGatewayClass, model.KindGateway, model.KindHTTPRoute, model.KindGRPCRoute, model.KindTCPRoute, model.KindTLSRoute, model.KindUDPRoute:
			obj = gateway[p.Ref()]
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

// gatewayObjects indexes the Gateway API objects of a snapshot by ref.
func gatewayObjects(snap *source.Snapshot) map[model.ObjectRef]runtime.Object {
	out := map[model.ObjectRef]runtime.Object{}
	for _, c := range snap.GatewayClasses {
		out[model.ObjectRef{Kind: model.KindGatewayClass, Name: c.Name}] = c
	}
	for _, gw := range snap.Gateways {
		out[model.ObjectRef{Kind: model.KindGateway, Namespace: gw.Namespace, Name: gw.Name}] = gw
	}
	for _, r := range snap.HTTPRoutes {
		out[model.ObjectRef{Kind: model.KindHTTPRoute, Namespace: r.Namespace, Name: r.Name}] = r
	}
	for _, r := range snap.GRPCRoutes {
		out[model.ObjectRef{Kind: model.KindGRPCRoute, Namespace: r.Namespace, Name: r.Name}] = r
	}
	for _, r := range snap.UDPRoutes {
		out[model.ObjectRef{Kind: model.KindUDPRoute, Namespace: r.Namespace, Name: r.Name}] = r
	}
	for _, r := range snap.TCPRoutes {
		out[model.ObjectRef{Kind: model.KindTCPRoute, Namespace: r.Namespace, Name: r.Name}] = r
	}
	for _, r := range snap.TLSRoutes {
		out[model.ObjectRef{Kind: model.KindTLSRoute, Namespace: r.Namespace, Name: r.Name}] = r
	}
	return out
}

// noIngresses serves the agent's API, which knows load balancers only.
type noIngresses struct{}

func (noIngresses) Ingress(string, string) (*networkingv1.Ingress, []model.Problem, bool) {
	return nil, nil, false
}
