package pipeline

import (
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
)

// Ingress implements api.Ingresses from the last snapshot: a copy, with
// the status the sink holds (pier run) or the snapshot's (the API
// server's, in Kubernetes mode), and the problems of the last rebuild.
func (p *Pipeline) Ingress(namespace, name string) (*networkingv1.Ingress, []model.Problem, bool) {
	for _, st := range p.ingresses(func(ing *networkingv1.Ingress) bool {
		return ing.Namespace == namespace && ing.Name == name
	}) {
		return st.Ingress, st.Problems, true
	}
	return nil, nil, false
}

// ingresses returns the Ingresses of the last snapshot that keep selects,
// as copies with their status and problems; nil before the first snapshot.
func (p *Pipeline) ingresses(keep func(*networkingv1.Ingress) bool) []IngressState {
	p.init()
	p.mu.Lock()
	snap := p.snap
	p.mu.Unlock()
	if snap == nil {
		return nil
	}
	reader, _ := p.Status.(StatusReader)
	out := []IngressState{}
	for _, ing := range snap.Ingresses {
		if !keep(ing) {
			continue
		}
		ref := model.IngressRef(ing.Namespace, ing.Name)
		c := ing.DeepCopy()
		c.APIVersion, c.Kind = "networking.k8s.io/v1", "Ingress"
		if reader != nil {
			c.Status.LoadBalancer.Ingress = reader.Published(ref)
		}
		out = append(out, IngressState{Ingress: c, Problems: p.Book.Of(ref)})
	}
	return out
}

// IngressState is one Ingress as pier knows it: a copy with the status it
// publishes, and the problems of the last rebuild.
type IngressState struct {
	Ingress  *networkingv1.Ingress
	Problems []model.Problem
}

// Ingresses lists every Ingress of the last snapshot as Ingress does one
// (the web view reads it). Before the first snapshot (a controller
// replica that has not led) it returns nil: not known here.
func (p *Pipeline) Ingresses() []IngressState {
	return p.ingresses(func(*networkingv1.Ingress) bool { return true })
}
