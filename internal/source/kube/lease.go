package kube

import (
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Agent heartbeats: each `pier agent` renews a Lease named
// AgentLeasePrefix+node, holder the node, in the controller's namespace.
// The controller places load balancers only on nodes whose Lease is fresh,
// and agents read their peers' Leases (the API server arbitrates which of
// two nodes that cannot see each other may hold an address). One
// definition of "fresh" serves both, here.
const (
	AgentLeasePrefix = "pier-agent-"
	// LabelHeartbeat marks the agents' Leases, so informers list only
	// them (the leader-election Lease lives in the same namespace).
	LabelHeartbeat = "pier.dev/heartbeat"
	heartbeatValue = "agent"
	// AnnotationReportsWrittenAt on an agent's Lease is the time (the
	// agent's clock, RFC 3339 with nanoseconds) up to which that agent had
	// written every status report it made when it renewed the Lease. A
	// peer weighs the agent's reports by it: a Lease renewed right after
	// an outage says the agent is back, not that its reports are current.
	AnnotationReportsWrittenAt = "pier.dev/reports-written-at"
)

// AgentLeaseName is the name of node's heartbeat Lease.
func AgentLeaseName(node string) string { return AgentLeasePrefix + node }

// AgentLeaseLabels are the labels an agent puts on its Lease.
func AgentLeaseLabels() map[string]string { return map[string]string{LabelHeartbeat: heartbeatValue} }

// AgentLeaseSelector selects the agents' Leases (server side).
func AgentLeaseSelector() string { return LabelHeartbeat + "=" + heartbeatValue }

// LeaseExpiry returns the node an agent Lease belongs to and when it
// expires: renewTime plus leaseDurationSeconds, both from the agent's
// clock, so node clocks must agree to well under the heartbeat timeout
// (NTP). ok is false for a Lease that is not a complete agent heartbeat:
// its name must match its holder, and it must carry a renew time and a
// duration.
func LeaseExpiry(l *coordinationv1.Lease) (node string, expires time.Time, ok bool) {
	if l.Spec.HolderIdentity == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return "", time.Time{}, false
	}
	node = *l.Spec.HolderIdentity
	if node == "" || l.Name != AgentLeaseName(node) {
		return "", time.Time{}, false
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	return node, l.Spec.RenewTime.Add(d), true
}

// LeaseAlive reports whether l is a fresh agent heartbeat at now.
func LeaseAlive(l *coordinationv1.Lease, now time.Time) bool {
	_, expires, ok := LeaseExpiry(l)
	return ok && l.DeletionTimestamp == nil && now.Before(expires)
}

// liveness is which nodes' agents are alive at one instant, and the next
// instant at which that can change without any event: the earliest expiry
// among the fresh Leases (zero when none is fresh).
type liveness struct {
	alive map[string]bool
	next  time.Time
}

func livenessAt(leases []*coordinationv1.Lease, now time.Time) liveness {
	lv := liveness{alive: map[string]bool{}}
	for _, l := range leases {
		if !LeaseAlive(l, now) {
			continue
		}
		node, expires, _ := LeaseExpiry(l)
		lv.alive[node] = true
		if lv.next.IsZero() || expires.Before(lv.next) {
			lv.next = expires
		}
	}
	return lv
}

// sameAlive: only a node's agent coming or going matters to placement;
// a renewal that keeps a Lease fresh does not.
func (lv liveness) sameAlive(other liveness) bool { return maps.Equal(lv.alive, other.alive) }

// SetReportsWrittenAt records on l the time up to which its agent's
// reports are written (AnnotationReportsWrittenAt); a zero t removes it.
func SetReportsWrittenAt(l *coordinationv1.Lease, t time.Time) {
	if t.IsZero() {
		delete(l.Annotations, AnnotationReportsWrittenAt)
		return
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationReportsWrittenAt] = t.UTC().Format(time.RFC3339Nano)
}

// ReportsWrittenAt reads AnnotationReportsWrittenAt from l: the zero time
// when absent or unreadable (an agent that predates it), which never
// counts as current.
func ReportsWrittenAt(l *coordinationv1.Lease) time.Time {
	t, err := time.Parse(time.RFC3339Nano, l.Annotations[AnnotationReportsWrittenAt])
	if err != nil {
		return time.Time{}
	}
	return t
}

// NewAgentLease is the Lease an agent creates for node.
func NewAgentLease(namespace, node string, duration time.Duration, now time.Time) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: AgentLeaseName(node), Labels: AgentLeaseLabels()}}
	RenewAgentLease(l, node, duration, now)
	l.Spec.AcquireTime = l.Spec.RenewTime
	return l
}

// RenewAgentLease sets what a renewal writes on l.
func RenewAgentLease(l *coordinationv1.Lease, node string, duration time.Duration, now time.Time) {
	secs := int32(max(1, (duration+time.Second-1)/time.Second))
	t := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &node
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &t
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	for k, v := range AgentLeaseLabels() {
		l.Labels[k] = v
	}
}
