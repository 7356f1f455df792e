package standalone

import (
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/web"
)

// web is the web view of `pier run` (issue 12). Config stays nil until
// the lead wires it to the renderer: the page then says the rendered
// haproxy.conf is not available in this mode.
func (v *view) web(st store.Store) *web.Handler {
	return &web.Handler{Store: st, Ingresses: v, Logger: v.logger.With("component", "web")}
}

// Ingresses implements web.Ingresses from the last translated snapshot:
// copies, with the published status and the problems found.
func (v *view) Ingresses() []web.IngressInfo {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make([]web.IngressInfo, 0, len(v.snap.Ingresses))
	for _, ing := range v.snap.Ingresses {
		c := ing.DeepCopy()
		key := c.Namespace + "/" + c.Name
		c.Status.LoadBalancer.Ingress = append(c.Status.LoadBalancer.Ingress[:0:0], v.published[key]...)
		out = append(out, web.IngressInfo{Ingress: c, Problems: append(v.problems[key][:0:0], v.problems[key]...)})
	}
	return out
}
