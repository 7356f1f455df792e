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
	r := model.NodeStatus{Node: a.cfg.Node, State: state, ConfigHash: configHash, Message: message}
	if state == model.StateActive {
		r.SpecHash = lb.SpecHash()
	} else if cur := a.applied[lb.UUID]; cur != nil {
		// Keep the record of the last spec that did apply: it still serves.
		r.SpecHash, r.ConfigHash = cur.SpecHash(), a.hashes[lb.UUID]
	}
	if last, ok := a.reported[lb.UUID]; ok && last == r {
		return // nothing new: a write would only wake every watcher
	}
	stamped := r
	stamped.UpdatedAt = time.Now().UTC()
	if err := a.cfg.Store.PutNodeStatus(ctx, lb.UUID, stamped); err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			a.cfg.Logger.Warn("could not report status", "lb", lb.Name, "error", err)
		}
		return
	}
	a.reported[lb.UUID] = r
}
