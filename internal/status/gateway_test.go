package status

import (
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

var (
	epoch = metav1.NewTime(time.Unix(0, 0).UTC())
	then  = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	now   = metav1.NewTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
)

func cond(typ string, st metav1.ConditionStatus, reason string, gen int64, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: st, Reason: reason, ObservedGeneration: gen, LastTransitionTime: at}
}

// The GatewayClass CRD gives every class Accepted=Unknown: pier's
// Accepted=True replaces it (one Accepted, never two), another type is
// kept, an unchanged status keeps its transition time, and merging what
// was written again changes nothing (no-op writes are skipped on it).
func TestMergeConditions(t *testing.T) {
	crdDefault := []metav1.Condition{cond("Accepted", metav1.ConditionUnknown, "Pending", 0, epoch)}
	want := []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted", 3, metav1.Time{})}
	got := MergeConditions(crdDefault, want, now)
	if len(got) != 1 || got[0].Status != metav1.ConditionTrue || got[0].ObservedGeneration != 3 || !got[0].LastTransitionTime.Equal(&now) {
		t.Fatalf("merged %+v, want one Accepted=True observed 3 at now", got)
	}
	if again := MergeConditions(got, want, metav1.NewTime(now.Add(time.Hour))); !SameGatewayAPIStatus(again, got) {
		t.Errorf("merging the same conditions again changed them: %+v → %+v", got, again)
	}

	have := []metav1.Condition{
		cond("Accepted", metav1.ConditionTrue, "Accepted", 2, then),
		cond("example.com/Healthy", metav1.ConditionTrue, "Fine", 2, then),
		cond("Programmed", metav1.ConditionFalse, "Pending", 2, then),
	}
	want = []metav1.Condition{
		cond("Accepted", metav1.ConditionTrue, "Accepted", 3, metav1.Time{}),
		cond("Programmed", metav1.ConditionTrue, "Programmed", 3, metav1.Time{}),
		cond("ResolvedRefs", metav1.ConditionTrue, "ResolvedRefs", 3, metav1.Time{}),
	}
	got = MergeConditions(have, want, now)
	wantTypes := []string{"Accepted", "example.com/Healthy", "Programmed", "ResolvedRefs"}
	wantTimes := []metav1.Time{then, then, now, now}
	if len(got) != len(wantTypes) {
		t.Fatalf("merged %+v", got)
	}
	for i := range got {
		if got[i].Type != wantTypes[i] || !got[i].LastTransitionTime.Equal(&wantTimes[i]) {
			t.Errorf("condition %d: %s at %s, want %s at %s", i, got[i].Type, got[i].LastTransitionTime, wantTypes[i], wantTimes[i])
		}
	}
	if got[0].ObservedGeneration != 3 {
		t.Errorf("Accepted observedGeneration %d, want 3", got[0].ObservedGeneration)
	}
	if have[2].Status != metav1.ConditionFalse {
		t.Error("MergeConditions modified its input")
	}
}

// Entries of other controllers stay as they are, where they are; pier's
// entry for a parentRef keeps its place and transition times; pier's
// entry for a parent no longer named goes; a new one is appended.
func TestMergeRouteParents(t *testing.T) {
	ours := gwv1.GatewayController("pier.dev/gateway-controller")
	ref := func(name string) gwv1.ParentReference { return gwv1.ParentReference{Name: gwv1.ObjectName(name)} }
	entry := func(name string, ctl gwv1.GatewayController, cs ...metav1.Condition) gwv1.RouteParentStatus {
		return gwv1.RouteParentStatus{ParentRef: ref(name), ControllerName: ctl, Conditions: cs}
	}
	theirs := entry("their-gw", "example.com/other", cond("Accepted", metav1.ConditionFalse, "NotAllowedByListeners", 1, then))
	have := []gwv1.RouteParentStatus{
		entry("gw", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 1, then)),
		theirs,
		entry("gone", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 1, then)),
	}
	want := []gwv1.RouteParentStatus{
		entry("new", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 2, metav1.Time{})),
		entry("gw", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 2, metav1.Time{}),
			cond("ResolvedRefs", metav1.ConditionFalse, "RefNotPermitted", 2, metav1.Time{})),
	}
	got := MergeRouteParents(have, want, ours, now)
	if len(got) != 3 {
		t.Fatalf("parents %+v", got)
	}
	if got[0].ParentRef.Name != "gw" || got[0].Conditions[0].ObservedGeneration != 2 || !got[0].Conditions[0].LastTransitionTime.Equal(&then) ||
		len(got[0].Conditions) != 2 || !got[0].Conditions[1].LastTransitionTime.Equal(&now) {
		t.Errorf("our entry for gw %+v: want it first, updated, Accepted still dated %s", got[0], then)
	}
	if !SameGatewayAPIStatus(got[1], theirs) {
		t.Errorf("the other controller's entry changed: %+v, want %+v", got[1], theirs)
	}
	if got[2].ParentRef.Name != "new" || !got[2].Conditions[0].LastTransitionTime.Equal(&now) {
		t.Errorf("new entry %+v", got[2])
	}
	if again := MergeRouteParents(got, want, ours, metav1.NewTime(now.Add(time.Hour))); !SameGatewayAPIStatus(again, got) {
		t.Errorf("merging again changed the parents: %+v → %+v", got, again)
	}
	// Nothing of ours wanted any more (the route left our Gateways): only
	// the other controller's entry is left.
	if got := MergeRouteParents(have, nil, ours, now); len(got) != 1 || got[0].ControllerName != "example.com/other" {
		t.Errorf("parents without ours %+v", got)
	}
}

// A Gateway becomes Programmed, with its addresses, only when Decide
// publishes addresses for it (HAProxy serves it); its invalid listeners
// stay Programmed=False/Invalid.
func TestGatewaysProgrammed(t *testing.T) {
	ref := model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}
	in := &translate.GatewayStatus{Gateways: map[model.ObjectRef]gwv1.GatewayStatus{ref: {
		Conditions: []metav1.Condition{
			cond("Accepted", metav1.ConditionTrue, "Accepted", 1, metav1.Time{}),
			cond("Programmed", metav1.ConditionFalse, "Pending", 1, metav1.Time{}),
		},
		Listeners: []gwv1.ListenerStatus{
			{Name: "http", Conditions: []metav1.Condition{cond("Programmed", metav1.ConditionFalse, "Pending", 1, metav1.Time{})}},
			{Name: "bad", Conditions: []metav1.Condition{cond("Programmed", metav1.ConditionFalse, "Invalid", 1, metav1.Time{})}},
		},
	}}}
	pending := Gateways(in, Published{})
	if st := pending.Gateways[ref]; len(st.Addresses) != 0 || st.Conditions[1].Status != metav1.ConditionFalse {
		t.Errorf("not served yet: %+v", st)
	}
	served := Gateways(in, Published{ref: {{IP: "10.0.0.1"}, {IP: "192.0.2.1"}}})
	st := served.Gateways[ref]
	if len(st.Addresses) != 2 || st.Addresses[0].Value != "10.0.0.1" || *st.Addresses[0].Type != gwv1.IPAddressType ||
		st.Addresses[1].Value != "192.0.2.1" {
		t.Errorf("addresses %+v", st.Addresses)
	}
	if c := st.Conditions[1]; c.Status != metav1.ConditionTrue || c.Reason != "Programmed" || c.ObservedGeneration != 1 {
		t.Errorf("Programmed %+v", c)
	}
	if st.Listeners[0].Conditions[0].Status != metav1.ConditionTrue || st.Listeners[1].Conditions[0].Reason != "Invalid" {
		t.Errorf("listeners %+v", st.Listeners)
	}
	if in.Gateways[ref].Conditions[1].Status != metav1.ConditionFalse {
		t.Error("Gateways modified its input")
	}
	back := FromGatewayAddresses(st.Addresses)
	if !Equal(back, []networkingv1.IngressLoadBalancerIngress{{IP: "10.0.0.1"}, {IP: "192.0.2.1"}}) {
		t.Errorf("addresses read back %+v", back)
	}
}

// A ListenerSet is Programmed, with its pending listeners, once its
// Gateway is served; a refused one stays as translation said, and so do
// the ListenerSets of a Gateway not served yet.
func TestListenerSetsProgrammed(t *testing.T) {
	served := model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "gw"}
	waiting := model.ObjectRef{Kind: model.KindGateway, Namespace: "default", Name: "later"}
	set := func(gw model.ObjectRef, programmed, reason string) translate.ListenerSetStatus {
		return translate.ListenerSetStatus{Gateway: gw,
			Conditions: []metav1.Condition{cond("Programmed", metav1.ConditionFalse, programmed, 1, metav1.Time{})},
			Listeners: []gwv1.ListenerStatus{{Name: "l", Conditions: []metav1.Condition{
				cond("Programmed", metav1.ConditionFalse, reason, 1, metav1.Time{})}}}}
	}
	ref := func(name string) model.ObjectRef {
		return model.ObjectRef{Kind: model.KindListenerSet, Namespace: "team", Name: name}
	}
	in := &translate.GatewayStatus{ListenerSets: map[model.ObjectRef]translate.ListenerSetStatus{
		ref("ok"):      set(served, "Pending", "Pending"),
		ref("refused"): set(served, "NotAllowed", "Invalid"),
		ref("waiting"): set(waiting, "Pending", "Pending"),
	}, AttachedListenerSets: map[model.ObjectRef]int32{served: 1}}
	out := Gateways(in, Published{served: {{IP: "10.0.0.1"}}})
	for name, want := range map[string][2]string{"ok": {"Programmed", "Programmed"}, "refused": {"NotAllowed", "Invalid"}, "waiting": {"Pending", "Pending"}} {
		st := out.ListenerSets[ref(name)]
		if got := [2]string{st.Conditions[0].Reason, st.Listeners[0].Conditions[0].Reason}; got != want {
			t.Errorf("%s: Programmed reasons %v, want %v", name, got, want)
		}
	}
	if in.ListenerSets[ref("ok")].Conditions[0].Reason != "Pending" {
		t.Error("Gateways modified its input")
	}
	if out.AttachedListenerSets[served] != 1 {
		t.Errorf("attachedListenerSets %v", out.AttachedListenerSets)
	}
}

// A policy's ancestors of other controllers are kept as they were, where
// they were; ours are replaced, and dropped when no longer wanted.
func TestMergePolicyAncestors(t *testing.T) {
	ours := gwv1.GatewayController("pier.dev/gateway-controller")
	entry := func(name string, ctl gwv1.GatewayController, cs ...metav1.Condition) gwv1.PolicyAncestorStatus {
		return gwv1.PolicyAncestorStatus{AncestorRef: gwv1.ParentReference{Name: gwv1.ObjectName(name)}, ControllerName: ctl, Conditions: cs}
	}
	theirs := entry("unmanaged", "example.com/other", cond("Accepted", metav1.ConditionTrue, "Accepted", 1, then))
	have := []gwv1.PolicyAncestorStatus{theirs, entry("gw", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 1, then))}
	want := []gwv1.PolicyAncestorStatus{entry("gw", ours, cond("Accepted", metav1.ConditionTrue, "Accepted", 2, metav1.Time{}))}
	got := MergePolicyAncestors(have, want, ours, now)
	if len(got) != 2 || !SameGatewayAPIStatus(got[0], theirs) {
		t.Fatalf("ancestors %+v: want the other controller's first and unchanged", got)
	}
	if c := got[1].Conditions[0]; c.ObservedGeneration != 2 || !c.LastTransitionTime.Equal(&then) {
		t.Errorf("our entry %+v: want generation 2, transition time kept", got[1])
	}
	if got := MergePolicyAncestors(have, nil, ours, now); len(got) != 1 || got[0].ControllerName != "example.com/other" {
		t.Errorf("ancestors without ours %+v", got)
	}
}
