package cluster

import (
	"log/slog"

	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/web"
)

// web is the web view of `pier controller` (issue 12). Ingresses come
// from the informer cache, which only the leader runs: a standby replica
// says they are not available there; the load balancer pages, read from
// the custom resource, are complete on every replica.
func (e *eventSink) web(st store.Store, logger *slog.Logger) *web.Handler {
	return &web.Handler{Store: st, Ingresses: e, Logger: logger.With("component", "web")}
}

// Ingresses implements web.Ingresses from the last snapshot the leader
// translated; the status is what the API server holds. A replica that
// has not led has none: nil, which the view shows as "not available".
func (e *eventSink) Ingresses() []web.IngressInfo {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.snap == nil {
		return nil
	}
	out := make([]web.IngressInfo, 0, len(e.snap.Ingresses))
	for _, ing := range e.snap.Ingresses {
		key := ing.Namespace + "/" + ing.Name
		out = append(out, web.IngressInfo{Ingress: ing.DeepCopy(), Problems: append(e.problems[key][:0:0], e.problems[key]...)})
	}
	return out
}
