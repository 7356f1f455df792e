package status

import (
	"net/netip"

	networkingv1 "k8s.io/api/networking/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// Gateways completes what translation says the Gateway API objects of our
// classes should show with what only the status pass knows: a Gateway
// whose load balancer HAProxy serves (the same signal that publishes an
// Ingress's addresses, next from Decide) is Programmed, lists its
// addresses, and its served listeners are Programmed. The input is not
// modified.
func Gateways(in *translate.GatewayStatus, next Published) *translate.GatewayStatus {
	if in == nil {
		return nil
	}
	out := &translate.GatewayStatus{
		Classes:        in.Classes,
		Routes:         in.Routes,
		Infrastructure: in.Infrastructure,
		Policies:       in.Policies,
		Gateways:       make(map[model.ObjectRef]gwv1.GatewayStatus, len(in.Gateways)),

		AttachedListenerSets: in.AttachedListenerSets,
		ListenerSets:         make(map[model.ObjectRef]translate.ListenerSetStatus, len(in.ListenerSets)),
	}
	// A ListenerSet's listeners are served by its Gateway's load
	// balancer: they are Programmed when it is.
	for ref, st := range in.ListenerSets {
		st = st.DeepCopy()
		if len(next[st.Gateway]) > 0 {
			programmed(st.Conditions, string(gwv1.GatewayConditionProgrammed), string(gwv1.GatewayReasonPending),
				string(gwv1.GatewayReasonProgrammed))
			for i := range st.Listeners {
				programmed(st.Listeners[i].Conditions, string(gwv1.ListenerConditionProgrammed),
					string(gwv1.ListenerReasonPending), string(gwv1.ListenerReasonProgrammed))
			}
		}
		out.ListenerSets[ref] = st
	}
	for ref, st := range in.Gateways {
		st = *st.DeepCopy()
		if addrs := next[ref]; len(addrs) > 0 {
			st.Addresses = gatewayAddresses(addrs)
			programmed(st.Conditions, string(gwv1.GatewayConditionProgrammed), string(gwv1.GatewayReasonPending),
				string(gwv1.GatewayReasonProgrammed))
			for i := range st.Listeners {
				programmed(st.Listeners[i].Conditions, string(gwv1.ListenerConditionProgrammed),
					string(gwv1.ListenerReasonPending), string(gwv1.ListenerReasonProgrammed))
			}
		}
		out.Gateways[ref] = st
	}
	return out
}

// programmed turns a Programmed=False/Pending condition True: only a
// pending one, never one False for another reason (an invalid listener).
func programmed(cs []metav1.Condition, typ, pending, reason string) {
	for i := range cs {
		if cs[i].Type == typ && cs[i].Status == metav1.ConditionFalse && cs[i].Reason == pending {
			cs[i].Status, cs[i].Reason, cs[i].Message = metav1.ConditionTrue, reason, ""
		}
	}
}

func gatewayAddresses(in []networkingv1.IngressLoadBalancerIngress) []gwv1.GatewayStatusAddress {
	out := make([]gwv1.GatewayStatusAddress, 0, len(in))
	for _, a := range in {
		typ, value := gwv1.HostnameAddressType, a.Hostname
		if a.IP != "" {
			typ, value = gwv1.IPAddressType, a.IP
		}
		out = append(out, gwv1.GatewayStatusAddress{Type: &typ, Value: value})
	}
	return out
}

// FromGatewayAddresses is what a Gateway publishes now, in the form
// Decide compares (IP or hostname entries).
func FromGatewayAddresses(in []gwv1.GatewayStatusAddress) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range in {
		if _, err := netip.ParseAddr(a.Value); err == nil {
			out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a.Value})
		} else if a.Value != "" {
			out = append(out, networkingv1.IngressLoadBalancerIngress{Hostname: a.Value})
		}
	}
	return out
}

// MergeConditions sets want into have by type, as meta.SetStatusCondition
// does: a condition of a type already there is replaced in place (the
// CRD's default GatewayClass Accepted=Unknown included: replaced, never
// joined by a second Accepted), keeping its LastTransitionTime when its
// status did not change; a new one is appended with now; conditions of
// other types are kept. have is not modified.
func MergeConditions(have, want []metav1.Condition, now metav1.Time) []metav1.Condition {
	out := make([]metav1.Condition, 0, len(have)+len(want))
	used := make([]bool, len(want))
	for _, h := range have {
		i := conditionIndex(want, h.Type)
		if i < 0 {
			out = append(out, h)
			continue
		}
		if used[i] {
			continue // a duplicate of this type: one is enough
		}
		used[i] = true
		out = append(out, transition(h, want[i], now))
	}
	for i, w := range want {
		if !used[i] {
			w.LastTransitionTime = now
			out = append(out, w)
		}
	}
	return out
}

func conditionIndex(cs []metav1.Condition, typ string) int {
	for i := range cs {
		if cs[i].Type == typ {
			return i
		}
	}
	return -1
}

// transition is want with have's LastTransitionTime when the status is
// the same (a new reason or message alone is no transition).
func transition(have, want metav1.Condition, now metav1.Time) metav1.Condition {
	if have.Status == want.Status && !have.LastTransitionTime.IsZero() {
		want.LastTransitionTime = have.LastTransitionTime
	} else {
		want.LastTransitionTime = now
	}
	return want
}

// MergeGateway is the status a Gateway of ours gets: want's conditions
// merged into have's, want's listeners (each listener's conditions
// merged with the same-named one's), want's addresses.
func MergeGateway(have, want gwv1.GatewayStatus, now metav1.Time) gwv1.GatewayStatus {
	out := *have.DeepCopy()
	out.Conditions = MergeConditions(have.Conditions, want.Conditions, now)
	out.Addresses = want.Addresses
	out.Listeners = nil
	for _, l := range want.Listeners {
		l = *l.DeepCopy()
		var prev []metav1.Condition
		for _, h := range have.Listeners {
			if h.Name == l.Name {
				prev = h.Conditions
			}
		}
		l.Conditions = MergeConditions(prev, l.Conditions, now)
		out.Listeners = append(out.Listeners, l)
	}
	return out
}

// MergeRouteParents is an HTTPRoute's status.parents with pier's entries
// (controllerName ours) replaced by want: an entry of ours for the same
// parentRef keeps its place and its conditions' transition times, one no
// longer wanted is dropped, a new one is appended. Entries of other
// controllers are kept as they are, where they are.
func MergeRouteParents(have, want []gwv1.RouteParentStatus, controller gwv1.GatewayController, now metav1.Time) []gwv1.RouteParentStatus {
	return mergeOurs(have, want, controller, now, entryOps[gwv1.RouteParentStatus]{
		controller: func(e *gwv1.RouteParentStatus) gwv1.GatewayController { return e.ControllerName },
		index: func(want []gwv1.RouteParentStatus, h *gwv1.RouteParentStatus) int {
			return parentIndex(want, h.ParentRef)
		},
		conditions: func(e *gwv1.RouteParentStatus) *[]metav1.Condition { return &e.Conditions },
		clone:      func(e *gwv1.RouteParentStatus) gwv1.RouteParentStatus { return *e.DeepCopy() },
	})
}

// MergePolicyAncestors is MergeRouteParents for a policy's
// status.ancestors: entries of ours replaced by want (by ancestorRef),
// other controllers' kept as they are, where they are.
func MergePolicyAncestors(have, want []gwv1.PolicyAncestorStatus, controller gwv1.GatewayController, now metav1.Time) []gwv1.PolicyAncestorStatus {
	return mergeOurs(have, want, controller, now, entryOps[gwv1.PolicyAncestorStatus]{
		controller: func(e *gwv1.PolicyAncestorStatus) gwv1.GatewayController { return e.ControllerName },
		index: func(want []gwv1.PolicyAncestorStatus, h *gwv1.PolicyAncestorStatus) int {
			for j := range want {
				if apiequality.Semantic.DeepEqual(want[j].AncestorRef, h.AncestorRef) {
					return j
				}
			}
			return -1
		},
		conditions: func(e *gwv1.PolicyAncestorStatus) *[]metav1.Condition { return &e.Conditions },
		clone:      func(e *gwv1.PolicyAncestorStatus) gwv1.PolicyAncestorStatus { return *e.DeepCopy() },
	})
}

// entryOps are what mergeOurs needs of one kind of per-controller status
// entry (a route's parent, a policy's ancestor).
type entryOps[T any] struct {
	controller func(*T) gwv1.GatewayController
	index      func(want []T, have *T) int // the entry of want for have's parent, or -1
	conditions func(*T) *[]metav1.Condition
	clone      func(*T) T
}

// mergeOurs replaces the entries of controller in have by want, keeping
// their conditions' transition times where the status did not change,
// and keeps other controllers' entries as they are, where they are.
func mergeOurs[T any](have, want []T, controller gwv1.GatewayController, now metav1.Time, ops entryOps[T]) []T {
	out := make([]T, 0, len(have)+len(want))
	used := make([]bool, len(want))
	for k := range have {
		h := &have[k]
		if ops.controller(h) != controller {
			out = append(out, ops.clone(h))
			continue
		}
		i := ops.index(want, h)
		if i < 0 || used[i] {
			continue
		}
		used[i] = true
		w := ops.clone(&want[i])
		*ops.conditions(&w) = MergeConditions(*ops.conditions(h), *ops.conditions(&w), now)
		out = append(out, w)
	}
	for i := range want {
		if !used[i] {
			w := ops.clone(&want[i])
			*ops.conditions(&w) = MergeConditions(nil, *ops.conditions(&w), now)
			out = append(out, w)
		}
	}
	return out
}

func parentIndex(ps []gwv1.RouteParentStatus, ref gwv1.ParentReference) int {
	for i := range ps {
		if apiequality.Semantic.DeepEqual(ps[i].ParentRef, ref) {
			return i
		}
	}
	return -1
}

// SameGatewayAPIStatus reports whether a merged status equals the one an
// object has, so writers skip no-op writes.
func SameGatewayAPIStatus(a, b any) bool {
	return apiequality.Semantic.DeepEqual(a, b)
}
