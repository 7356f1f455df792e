package kube

import (
	"log/slog"
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// outage is the one exception to "a node is alive while its agent's Lease
// is fresh". When every agent that was alive goes silent at once, the
// likely cause is on our side (the API server was down, or this
// controller could not hear it), not every node failing together: each
// agent leaves HAProxy serving anyway, and there is no live node to move
// to. So the nodes stay alive (placements are kept), as the node
// lifecycle controller stops evicting in a full disruption. When the first
// Lease is fresh again, the others get one Lease duration to renew
// theirs; without that grace, whichever agent renewed first after an
// outage would take over every load balancer whose active node renewed a
// moment later, moving traffic between two healthy nodes.
//
// Leases do not expire at one instant when the API server goes away:
// they expire one renewal interval apart. So a node whose Lease expired
// is held (kept alive) until another agent proves that renewals still get
// through, by renewing after that expiry: then it is a node failure, and
// the node is given up, at most one renewal interval of the others after
// its expiry. If instead every Lease expires, that is the outage above.
//
// A deleted Lease is no silence (an agent that drained on exit deletes
// its own): only nodes whose Lease still exists are kept.
type outage struct {
	logger *slog.Logger
	prev   map[string]bool // alive as last judged
	frozen map[string]bool // kept alive through the outage; nil: none under way
	grace  time.Time       // zero while every agent is silent
}

// judge returns which agents count as alive at now, and when that may
// change without an event.
func (o *outage) judge(leases []*coordinationv1.Lease, now time.Time) liveness {
	raw := livenessAt(leases, now)
	switch {
	case len(raw.alive) == 0:
		o.silence(leases)
	case o.frozen != nil && o.grace.IsZero():
		o.grace = now.Add(longestDuration(leases))
		o.logger.Info("agent heartbeats are back; a node whose agent has not renewed by then is given up",
			"until", o.grace.Format(time.RFC3339Nano), "nodes", slices.Sorted(maps.Keys(o.frozen)))
	case o.frozen != nil && !now.Before(o.grace):
		o.frozen, o.grace = nil, time.Time{}
	}
	lv := liveness{alive: maps.Clone(raw.alive), next: raw.next}
	if o.frozen != nil {
		maps.Copy(lv.alive, o.frozen)
		if !o.grace.IsZero() && (lv.next.IsZero() || o.grace.Before(lv.next)) {
			lv.next = o.grace
		}
	} else {
		o.hold(lv.alive, leases, now)
	}
	o.prev = lv.alive
	return lv
}

// hold adds to alive the nodes alive before whose Lease expired with no
// fresh Lease renewed since (no proof yet that renewals get through).
func (o *outage) hold(alive map[string]bool, leases []*coordinationv1.Lease, now time.Time) {
	var latest time.Time // the last renewal of a fresh Lease
	for _, l := range leases {
		if LeaseAlive(l, now) && l.Spec.RenewTime.After(latest) {
			latest = l.Spec.RenewTime.Time
		}
	}
	for _, l := range leases {
		node, expires, ok := LeaseExpiry(l)
		if ok && o.prev[node] && !alive[node] && !latest.After(expires) {
			alive[node] = true
		}
	}
}

// silence starts an outage (or extends one that was in its grace) when
// every agent alive before went quiet but their Leases still exist.
func (o *outage) silence(leases []*coordinationv1.Lease) {
	kept := map[string]bool{}
	for _, l := range leases {
		if node, _, ok := LeaseExpiry(l); ok && o.prev[node] {
			kept[node] = true
		}
	}
	if len(kept) == 0 {
		return
	}
	if o.frozen == nil {
		o.logger.Warn("every agent's heartbeat expired at once: taken for an API server or controller outage, not node failures; placements kept",
			"nodes", slices.Sorted(maps.Keys(kept)))
		o.frozen = map[string]bool{}
	}
	maps.Copy(o.frozen, kept)
	o.grace = time.Time{}
}

func longestDuration(leases []*coordinationv1.Lease) time.Duration {
	var d time.Duration
	for _, l := range leases {
		if l.Spec.LeaseDurationSeconds != nil {
			d = max(d, time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second)
		}
	}
	return d
}
