package standalone

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// view is what the API and the agent read of the current state: the last
// snapshot, the problems found in it and the published Ingress status. It
// is the in-memory stand-in for the API server of the Kubernetes mode.
type view struct {
	mu        sync.RWMutex
	snap      *source.Snapshot
	problems  map[string][]model.Problem // by "namespace/name" of the Ingress
	published map[string][]networkingv1.IngressLoadBalancerIngress
}

func newView() *view {
	return &view{
		snap:      &source.Snapshot{},
		problems:  map[string][]model.Problem{},
		published: map[string][]networkingv1.IngressLoadBalancerIngress{},
	}
}

// Ingress implements api.Ingresses. It returns a copy with status filled.
func (v *view) Ingress(namespace, name string) (*networkingv1.Ingress, []model.Problem, bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	for _, ing := range v.snap.Ingresses {
		if ing.Namespace != namespace || ing.Name != name {
			continue
		}
		out := ing.DeepCopy()
		out.APIVersion, out.Kind = "networking.k8s.io/v1", "Ingress"
		key := namespace + "/" + name
		out.Status.LoadBalancer.Ingress = append([]networkingv1.IngressLoadBalancerIngress(nil), v.published[key]...)
		return out, append([]model.Problem(nil), v.problems[key]...), true
	}
	return nil, nil, false
}

// TLSPair implements agent.Secrets from the last snapshot.
func (v *view) TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.snap.Secret(namespace, name)
	if s == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], nil
}

func (v *view) setSnapshot(snap *source.Snapshot, problems []model.Problem) {
	byIngress := map[string][]model.Problem{}
	for _, p := range problems {
		if p.Kind == "Ingress" {
			key := p.Namespace + "/" + p.Name
			byIngress[key] = append(byIngress[key], p)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.snap, v.problems = snap, byIngress
}

func (v *view) publishedCopy() map[string][]networkingv1.IngressLoadBalancerIngress {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(map[string][]networkingv1.IngressLoadBalancerIngress, len(v.published))
	for k, s := range v.published {
		out[k] = s
	}
	return out
}

func (v *view) setPublished(p map[string][]networkingv1.IngressLoadBalancerIngress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.published = p
}
