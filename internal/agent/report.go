package agent

import (
	"context"
	"errors"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// report writes what this node applied into the LoadBalancer status, as
// this node's own entry: the active and the standby node both report. It
// reads nothing first: the last good spec and config are what this agent
// itself applied, and a report equal to the last one is not written again.
// This is the one function that talks to the store's status API.
func (a *Agent) report(ctx context.Context, lb *model.LoadBalancer, state model.State, configHash, message string) {
	r := model.NodeStatus{Node: a.cfg.Node, State: state, ConfigHash: configHash, Message: message, VRRP: a.roleOf(lb.UUID)}
	if state == model.StateActive {
		r.SpecHash = lb.SpecHash()
	} else if cur := a.applied[lb.UUID]; cur != nil {
		// Keep the record of the last spec that did apply: it still serves.
		r.SpecHash, r.ConfigHash = cur.SpecHash(), a.hashes[lb.UUID]
	}
	a.withStats(&r, lb.UUID)
	a.lastReport[lb.UUID] = model.NodeStatus{State: state, ConfigHash: configHash, Message: message}
	if last, ok := a.reported[lb.UUID]; ok && last == r {
		return // nothing new: a write would only wake every watcher
	}
	stamped := r
	stamped.UpdatedAt = time.Now().UTC()
	if err := a.cfg.Store.PutNodeStatus(ctx, lb.UUID, stamped); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.cfg.Logger.Warn("could not report status; retrying", "lb", lb.Name, "error", err)
			a.unreported[lb.UUID] = true
		}
		return
	}
	delete(a.unreported, lb.UUID)
	a.reported[lb.UUID] = r
	a.vrrp.reportedRole(lb.UUID, r.VRRP, stamped.UpdatedAt)
}

// reportAgain writes the reports that failed, and those whose VRRP role
// changed since they were written, with the state last reported.
func (a *Agent) reportAgain(ctx context.Context) {
	for uuid := range a.unreported {
		a.rereport(ctx, uuid)
	}
}

// rereport writes uuid's last report again with its current VRRP role.
func (a *Agent) rereport(ctx context.Context, uuid string) {
	last, ok := a.lastReport[uuid]
	if !ok {
		return
	}
	lb := a.applied[uuid]
	if lb == nil {
		lb = a.latest[uuid]
	}
	if lb == nil {
		return
	}
	a.report(ctx, lb, last.State, last.ConfigHash, last.Message)
}
