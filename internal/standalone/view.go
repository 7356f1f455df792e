package standalone

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/pipeline"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
)

// view is what the API and the agent read of the current state: the last
// snapshot, the problems found in it and the published Ingress status. It
// is the in-memory stand-in for the API server of the Kubernetes mode.
type view struct {
	logger     *slog.Logger
	problemLog pipeline.ProblemLog
	mu         sync.RWMutex
	snap       *source.Snapshot           // the last snapshot translated, with its problems
	problems   map[string][]model.Problem // by "namespace/name" of the Ingress
	// secrets is the newest snapshot, set before anything built from it
	// is stored, so the agent never finds a Secret older than the spec.
	secrets   *source.Snapshot
	published map[string][]networkingv1.IngressLoadBalancerIngress
}

func newView(logger *slog.Logger) *view {
	return &view{
		logger:     logger,
		problemLog: pipeline.ProblemLog{Logger: logger},
		snap:       &source.Snapshot{},
		secrets:    &source.Snapshot{},
		problems:   map[string][]model.Problem{},
		published:  map[string][]networkingv1.IngressLoadBalancerIngress{},
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
	s := v.secrets.Secret(namespace, name)
	if s == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], nil
}

// observe takes a new snapshot before the pipeline stores anything built
// from it (pipeline.Pipeline.Observe).
func (v *view) observe(snap *source.Snapshot) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.secrets = snap
}

// Report implements pipeline.ProblemSink: the problems are kept for the
// API and logged once.
func (v *view) Report(_ context.Context, snap *source.Snapshot, problems []model.Problem) {
	byIngress := map[string][]model.Problem{}
	for _, p := range problems {
		if p.Kind == "Ingress" {
			key := p.Namespace + "/" + p.Name
			byIngress[key] = append(byIngress[key], p)
		}
	}
	v.problemLog.New(problems)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.snap, v.problems = snap, byIngress
}

// Current implements pipeline.StatusSink.
func (v *view) Current(*source.Snapshot) pipeline.Published {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(pipeline.Published, len(v.published))
	for k, s := range v.published {
		out[k] = s
	}
	return out
}

// Publish implements pipeline.StatusSink: the status lives in memory and
// the API serves it.
func (v *view) Publish(_ context.Context, _ *source.Snapshot, _ map[string]bool, next pipeline.Published) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, key := range status.Keys(next) {
		if !status.Equal(v.published[key], next[key]) {
			v.logger.Info("ingress status updated", "ingress", key, "addresses", status.String(next[key]))
		}
	}
	v.published = next
	return nil
}
