package translate

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
)

// DefaultGatewayControllerName is the GatewayClass spec.controllerName
// pier answers to.
const DefaultGatewayControllerName = "pier.dev/gateway-controller"

// GatewayStatus is what the Gateway API objects of our classes should
// say, as data: the status writer (leader only) copies it into the
// objects. Translation cannot know whether HAProxy serves a Gateway yet,
// so Programmed is False/Pending here; the status pass turns it True once
// an agent reports the load balancer active, as it publishes Ingress
// addresses. The Gateway API translation (internal/gatewayapi) fills it;
// it is declared here because a Result carries it through every path
// that patches a translation.
type GatewayStatus struct {
	// Classes by GatewayClass name: the conditions of each class of ours.
	Classes map[string][]metav1.Condition
	// Gateways of our classes, by ref.
	Gateways map[model.ObjectRef]gwv1.GatewayStatus
	// Routes by HTTPRoute ref: one entry per parentRef naming a Gateway
	// of ours. Entries of other controllers are not here; the writer
	// keeps them as they are.
	Routes map[model.ObjectRef][]gwv1.RouteParentStatus
	// Infrastructure by Gateway ref, for each Gateway of ours that has a
	// load balancer: what the Service the writer publishes for it in its
	// namespace carries (docs/gateway-api.md, "Gateway infrastructure").
	Infrastructure map[model.ObjectRef]GatewayInfrastructure
	// Policies by BackendTLSPolicy ref: one status.ancestors entry per
	// Gateway of ours whose routes reach a Service it targets.
	Policies map[model.ObjectRef][]gwv1.PolicyAncestorStatus
	// ListenerSets by ListenerSet ref: each one whose parentRef names a
	// Gateway of ours.
	ListenerSets map[model.ObjectRef]ListenerSetStatus
	// AttachedListenerSets by Gateway ref: how many ListenerSets each
	// Gateway of ours accepted (status.attachedListenerSets, which
	// pier's v1.4.1 Gateway type has no field for).
	AttachedListenerSets map[model.ObjectRef]int32
}

// ListenerSetStatus is what a ListenerSet's status should say, and the
// Gateway it attaches to: its Programmed follows that Gateway's.
type ListenerSetStatus struct {
	Gateway    model.ObjectRef
	Conditions []metav1.Condition
	Listeners  []gwv1.ListenerStatus
}

// DeepCopy copies s.
func (s ListenerSetStatus) DeepCopy() ListenerSetStatus {
	out := ListenerSetStatus{Gateway: s.Gateway}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, *c.DeepCopy())
	}
	for _, l := range s.Listeners {
		out.Listeners = append(out.Listeners, *l.DeepCopy())
	}
	return out
}

// GatewayInfrastructure is a Gateway's spec.infrastructure labels and
// annotations, validated as Kubernetes metadata, and the ports of its
// listeners: what its published Service and EndpointSlice carry.
type GatewayInfrastructure struct {
	Labels      map[string]string
	Annotations map[string]string
	// Ports are the distinct listener ports, sorted by port then
	// protocol ("TCP" or "UDP").
	Ports []GatewayPort
}

// GatewayPort is one port of a published Gateway Service.
type GatewayPort struct {
	Port     int32
	Protocol string // "TCP" or "UDP"
}

// NotProgrammed records, on each Gateway of ours the controller could not
// give a load balancer (problems from controller.Reconciler.Apply: an
// address IPAM refused, no node, a quota), Programmed=False with the
// problem's reason (the spec's AddressNotUsable, AddressNotAssigned or
// NoResources) and message. A Gateway that was served keeps its previous
// load balancer, so its addresses stay published.
func (st *GatewayStatus) NotProgrammed(problems []model.Problem) {
	if st == nil {
		return
	}
	for _, pr := range problems {
		if pr.Kind != model.KindGateway {
			continue
		}
		ref := model.ObjectRef{Kind: model.KindGateway, Namespace: pr.Namespace, Name: pr.Name}
		gs, ok := st.Gateways[ref]
		if !ok {
			continue
		}
		for i := range gs.Conditions {
			c := &gs.Conditions[i]
			if c.Type == string(gwv1.GatewayConditionProgrammed) {
				c.Status, c.Reason, c.Message = metav1.ConditionFalse, pr.Reason, pr.Message
			}
		}
		st.Gateways[ref] = gs
	}
}
