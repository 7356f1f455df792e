package gatewayapi

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// ListenerSets (the Gateway API's SupportListenerSet) add listeners to a
// Gateway from other objects, often of other namespaces. pier merges
// them into the Gateway's load balancer: a ListenerSet's listeners join
// the Gateway's on their ports (one model listener per port, told apart
// by hostname, as the Gateway's own), so they share its address, its
// HAProxy frontends and its listener isolation. What stays theirs: a
// route attaches to a ListenerSet's listeners only through a parentRef
// naming the ListenerSet (a Gateway parentRef never selects them, even
// by sectionName), allowedRoutes "Same" means the ListenerSet's
// namespace, and certificateRefs are resolved as the ListenerSet's (a
// ReferenceGrant must permit ListenerSets of its namespace).
//
// A Gateway takes the ListenerSets its spec.allowedListeners allows
// (none when it is unset). Conflicts follow the spec's precedence: the
// Gateway's listeners first, then ListenerSets oldest first (then by
// namespace and name), each in its listeners' order; a ListenerSet
// listener that conflicts with one before it (same port and hostname,
// or same port and another protocol) is not accepted, and the one
// before it keeps serving. A ListenerSet none of whose listeners can
// serve is not accepted (ListenersNotValid).

// The ListenerSet conditions and reasons of Gateway API v1.5 and later,
// which pier's v1.4.1 module does not declare in package v1.
const (
	listenerSetConditionAccepted   = "Accepted"
	listenerSetConditionProgrammed = "Programmed"

	listenerSetReasonAccepted          = "Accepted"
	listenerSetReasonNotAllowed        = "NotAllowed"
	listenerSetReasonParentNotAccepted = "ParentNotAccepted"
	listenerSetReasonListenersNotValid = "ListenersNotValid"
	listenerSetReasonPending           = "Pending"
)

// parsedListenerSet is one ListenerSet naming a Gateway of ours.
type parsedListenerSet struct {
	ls      *source.ListenerSet
	ref     model.ObjectRef
	gateway *parsedGateway
	// refusal, when set, is why the ListenerSet is not accepted
	// (Accepted=False and Programmed=False with this reason).
	refusal, refusalMessage string
	listeners               []*gwListener
}

// ownListeners are the Gateway's own listeners, without its
// ListenerSets': what its status lists.
func (p *parsedGateway) ownListeners() []*gwListener {
	out := make([]*gwListener, 0, len(p.listeners))
	for _, l := range p.listeners {
		if l.set == nil {
			out = append(out, l)
		}
	}
	return out
}

// parentRefusal is why a parentRef's parent takes no route ("" when it
// may): the Gateway is refused, or the ListenerSet it names is.
func (p *parsedGateway) parentRefusal(parent gwv1.ParentReference, routeNS string) string {
	if p.refusal != "" {
		return "the Gateway is not accepted"
	}
	if ref := gatewayRefOf(parent, routeNS); ref.Kind == model.KindListenerSet {
		if s := p.sets[ref]; s != nil && s.refusal != "" {
			return "the ListenerSet is not accepted: " + s.refusalMessage
		}
	}
	return ""
}

// listenerSetParent is the Gateway a ListenerSet names; false when its
// parentRef names another kind.
func listenerSetParent(ls *source.ListenerSet) (model.ObjectRef, bool) {
	pr := ls.Spec.ParentRef
	if (pr.Group != nil && *pr.Group != gwv1.GroupName) || (pr.Kind != nil && *pr.Kind != model.KindGateway) {
		return model.ObjectRef{}, false
	}
	ns := ls.Namespace
	if pr.Namespace != nil && *pr.Namespace != "" {
		ns = string(*pr.Namespace)
	}
	return model.ObjectRef{Kind: model.KindGateway, Namespace: ns, Name: string(pr.Name)}, true
}

// allowsListenerSets applies the Gateway's spec.allowedListeners to a
// ListenerSet of namespace ns: None (also when unset), Same, All, or a
// label selector on the namespace.
func (p *parsedGateway) allowsListenerSets(ns string, nsLabels map[string]string) bool {
	al := p.gw.Spec.AllowedListeners
	if al == nil || al.Namespaces == nil || al.Namespaces.From == nil {
		return false
	}
	switch *al.Namespaces.From {
	case gwv1.NamespacesFromAll:
		return true
	case gwv1.NamespacesFromSame:
		return ns == p.gw.Namespace
	case gwv1.NamespacesFromSelector:
		if al.Namespaces.Selector == nil {
			return false
		}
		s, err := metav1.LabelSelectorAsSelector(al.Namespaces.Selector)
		return err == nil && s.Matches(labels.Set(nsLabels))
	}
	return false
}

// attachListenerSets parses the ListenerSets naming Gateways of ours,
// oldest first (their precedence), and merges the listeners of those a
// Gateway accepts into it. Each one's ref joins gws, mapped to its
// Gateway, so that routes find it as they find Gateways.
func attachListenerSets(sets []*source.ListenerSet, gws map[model.ObjectRef]*parsedGateway, ns map[string]map[string]string,
	x *index, problems *[]model.Problem) []*parsedListenerSet {
	var out []*parsedListenerSet
	for _, ls := range oldestObjects(sets) {
		gwRef, ok := listenerSetParent(ls)
		p := gws[gwRef]
		if !ok || p == nil {
			continue // another controller's, or no Gateway's
		}
		s := &parsedListenerSet{ls: ls, gateway: p,
			ref: model.ObjectRef{Kind: model.KindListenerSet, Namespace: ls.Namespace, Name: ls.Name}}
		if p.sets == nil {
			p.sets = map[model.ObjectRef]*parsedListenerSet{}
		}
		p.sets[s.ref], gws[s.ref] = s, p
		switch {
		case p.refusal != "":
			s.refusal, s.refusalMessage = listenerSetReasonParentNotAccepted, "the Gateway is not accepted"
		case !p.allowsListenerSets(ls.Namespace, namespaceLabelsOf(ns, ls.Namespace)):
			s.refusal, s.refusalMessage = listenerSetReasonNotAllowed, fmt.Sprintf(
				"Gateway %s/%s does not allow ListenerSets of namespace %s (spec.allowedListeners)", p.gw.Namespace, p.gw.Name, ls.Namespace)
		default:
			s.parseListeners(x, problems)
			if !anyUsable(s.listeners) {
				s.refusal, s.refusalMessage = listenerSetReasonListenersNotValid, "no listener is valid"
			}
		}
		if s.refusal == "" {
			p.listeners = append(p.listeners, s.listeners...)
			p.attachedSets++
		} else {
			*problems = append(*problems, s.problem(s.refusal, "", s.refusalMessage+": the ListenerSet is not served"))
		}
		out = append(out, s)
	}
	return out
}

// parseListeners validates the ListenerSet's listeners as a Gateway's,
// and refuses those that conflict with a listener before them: the
// Gateway's, an older ListenerSet's, or one earlier in this one.
func (s *parsedListenerSet) parseListeners(x *index, problems *[]model.Problem) {
	p := s.gateway
	from := referrer{kind: model.KindListenerSet, namespace: s.ls.Namespace}
	names := map[gwv1.SectionName]bool{}
	for i := range s.ls.Spec.Listeners {
		e := &s.ls.Spec.Listeners[i]
		l := parseListener(p.gw, from, &e.Listener, x)
		l.set = s
		switch {
		case l.notAccepted != "":
		case names[l.name]:
			// The API server refuses this; a manifest file may not.
			l.notAccepted, l.message = string(gwv1.ListenerReasonInvalid), "another listener of the ListenerSet has the same name"
		case len(e.Filters) > 0:
			l.notAccepted, l.message = string(reasonUnsupportedValue), "pier does not support listener filters"
		default:
			if reason, other := firstConflict(l, p.listeners, s.listeners); reason != "" {
				l.notAccepted, l.conflicted = reason, reason
				l.message = fmt.Sprintf("listener %s before it has the same port and %s", other,
					map[string]string{string(gwv1.ListenerReasonHostnameConflict): "hostname",
						string(gwv1.ListenerReasonProtocolConflict): "another protocol"}[reason])
			}
		}
		names[l.name] = true
		if l.message != "" {
			*problems = append(*problems, s.problem(firstNonEmpty(l.notAccepted, l.unresolved, l.caUnresolved),
				fmt.Sprintf("spec.listeners[%d]", i), l.message))
		}
		s.listeners = append(s.listeners, l)
	}
}

// firstConflict is the conflict of l with the first valid listener of
// the lists that it conflicts with, and that listener's name; "" when
// there is none.
func firstConflict(l *gwListener, lists ...[]*gwListener) (string, string) {
	for _, list := range lists {
		for _, b := range list {
			if !b.valid() {
				continue
			}
			if reason := conflictOf(l, b); reason != "" {
				name := string(b.name)
				if b.set != nil {
					name = b.set.ls.Namespace + "/" + b.set.ls.Name + " " + name
				}
				return reason, translate.Quote(name)
			}
		}
	}
	return "", ""
}

func (s *parsedListenerSet) problem(reason, field, message string) model.Problem {
	return model.Problem{Kind: model.KindListenerSet, Namespace: s.ls.Namespace, Name: s.ls.Name,
		Severity: model.SeverityError, Reason: reason, Field: field, Message: message}
}

// status is the ListenerSet's status. Programmed stays False/Pending
// until the status pass sees HAProxy serve its Gateway's load balancer.
func (s *parsedListenerSet) status() translate.ListenerSetStatus {
	gen := s.ls.Generation
	out := translate.ListenerSetStatus{Gateway: s.gateway.ref}
	if s.refusal != "" {
		out.Conditions = []metav1.Condition{
			condition(gen, listenerSetConditionAccepted, false, s.refusal, s.refusalMessage),
			condition(gen, listenerSetConditionProgrammed, false, s.refusal, "the ListenerSet is not served"),
		}
	} else {
		reason, message := listenerSetReasonAccepted, ""
		for _, l := range s.listeners {
			if !l.valid() {
				// Accepted, with the message saying not all of it is.
				message = "listener " + string(l.name) + " is not valid"
				break
			}
		}
		out.Conditions = []metav1.Condition{
			condition(gen, listenerSetConditionAccepted, true, reason, message),
			condition(gen, listenerSetConditionProgrammed, false, listenerSetReasonPending, "waiting for HAProxy to serve it"),
		}
	}
	for _, l := range s.listeners {
		out.Listeners = append(out.Listeners, l.status(gen))
	}
	return out
}
