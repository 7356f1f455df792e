package agent

import (
	"context"
	"errors"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// report writes what this node applied into the LoadBalancer status. Only
// the active node reports; the standby's view arrives with per-node
// status. This is the one function that talks to the store's status API.
func (a *Agent) report(ctx context.Context, lb *model.LoadBalancer, state model.State, configHash, message string) {
	if lb.Placement.Active != a.cfg.Node {
		return
	}
	st := model.Status{State: state, ConfigHash: configHash, Message: message, Node: a.cfg.Node, UpdatedAt: time.Now().UTC()}
	cur, err := a.cfg.Store.Get(ctx, lb.UUID)
	if err != nil {
		return // deleted meanwhile: nothing to report on
	}
	if state == model.StateActive {
		st.SpecHash = lb.SpecHash()
	} else {
		// Keep the record of the last spec that did apply: it still serves.
		st.SpecHash, st.ConfigHash = cur.Status.SpecHash, cur.Status.ConfigHash
	}
	old := cur.Status
	if old.State == st.State && old.SpecHash == st.SpecHash && old.ConfigHash == st.ConfigHash &&
		old.Message == st.Message && old.Node == st.Node {
		return // nothing new: a write would only wake every watcher
	}
	if err := a.cfg.Store.PutStatus(ctx, lb.UUID, st); err != nil && !errors.Is(err, store.ErrNotFound) {
		a.cfg.Logger.Warn("could not report status", "lb", lb.Name, "error", err)
	}
}
