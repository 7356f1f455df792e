package source

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerSet is a v1 ListenerSet (standard channel since Gateway API
// v1.5): more listeners for one Gateway, owned by another namespace or
// team. pier's module (v1.4.1) has no v1 type, and the experimental
// XListenerSet's entries lack fields v1 has, so this is pier's own type
// with v1's JSON names: the Kubernetes source reads it through the
// dynamic client (internal/source/kube/listenersets.go). TypeMeta keeps
// the version read, which says where its status is written.
type ListenerSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ListenerSetSpec   `json:"spec"`
	Status            ListenerSetStatus `json:"status,omitempty"`
}

// ListenerSetSpec is a ListenerSet's spec.
type ListenerSetSpec struct {
	ParentRef ParentGatewayReference `json:"parentRef"`
	Listeners []ListenerEntry        `json:"listeners,omitempty"`
}

// ParentGatewayReference names the Gateway a ListenerSet attaches to.
type ParentGatewayReference struct {
	Group     *gwv1.Group     `json:"group,omitempty"`
	Kind      *gwv1.Kind      `json:"kind,omitempty"`
	Name      gwv1.ObjectName `json:"name"`
	Namespace *gwv1.Namespace `json:"namespace,omitempty"`
}

// ListenerEntry is one listener of a ListenerSet: a Gateway listener's
// fields, and filters, which pier does not support (kept only to refuse
// the listener that has them).
type ListenerEntry struct {
	gwv1.Listener `json:",inline"`
	Filters       map[string]any `json:"filters,omitempty"`
}

// ListenerSetStatus is what a ListenerSet's status says.
type ListenerSetStatus struct {
	Conditions []metav1.Condition    `json:"conditions,omitempty"`
	Listeners  []ListenerEntryStatus `json:"listeners,omitempty"`
}

// ListenerEntryStatus is one listener's status in a ListenerSet: the
// same fields as a Gateway listener's.
type ListenerEntryStatus struct {
	Name           gwv1.SectionName      `json:"name"`
	SupportedKinds []gwv1.RouteGroupKind `json:"supportedKinds"`
	AttachedRoutes int32                 `json:"attachedRoutes"`
	Conditions     []metav1.Condition    `json:"conditions"`
}

// DeepCopyObject implements runtime.Object (the status writer copies the
// cached object before merging into it).
func (ls *ListenerSet) DeepCopyObject() runtime.Object { return ls.DeepCopy() }

// DeepCopy copies ls and everything it points to.
func (ls *ListenerSet) DeepCopy() *ListenerSet {
	if ls == nil {
		return nil
	}
	out := &ListenerSet{TypeMeta: ls.TypeMeta}
	ls.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.ParentRef = ParentGatewayReference{Name: ls.Spec.ParentRef.Name,
		Group: copyPtr(ls.Spec.ParentRef.Group), Kind: copyPtr(ls.Spec.ParentRef.Kind), Namespace: copyPtr(ls.Spec.ParentRef.Namespace)}
	for _, e := range ls.Spec.Listeners {
		c := ListenerEntry{Listener: *e.Listener.DeepCopy()}
		if e.Filters != nil {
			c.Filters = runtime.DeepCopyJSON(e.Filters)
		}
		out.Spec.Listeners = append(out.Spec.Listeners, c)
	}
	out.Status = *ls.Status.DeepCopy()
	return out
}

// DeepCopy copies a ListenerSet's status.
func (s *ListenerSetStatus) DeepCopy() *ListenerSetStatus {
	out := &ListenerSetStatus{}
	for _, c := range s.Conditions {
		out.Conditions = append(out.Conditions, *c.DeepCopy())
	}
	for _, l := range s.Listeners {
		c := ListenerEntryStatus{Name: l.Name, AttachedRoutes: l.AttachedRoutes}
		for _, k := range l.SupportedKinds {
			c.SupportedKinds = append(c.SupportedKinds, *k.DeepCopy())
		}
		for _, cond := range l.Conditions {
			c.Conditions = append(c.Conditions, *cond.DeepCopy())
		}
		out.Listeners = append(out.Listeners, c)
	}
	return out
}

func copyPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
