package standalone

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/status"
)

// view is the in-memory stand-in for the API server of the Kubernetes
// mode: it holds the published status (pipeline.StatusSink and
// StatusReader) and the newest snapshot's Secrets for the agent.
type view struct {
	logger *slog.Logger
	mu     sync.RWMutex
	// secrets is the newest snapshot, set before anything built from it
	// is stored, so the agent never finds a Secret older than the spec.
	secrets   *source.Snapshot
	published status.Published
}

func newView(logger *slog.Logger) *view {
	return &view{logger: logger, secrets: &source.Snapshot{}, published: status.Published{}}
}

// TLSPair implements haproxydriver.Secrets from the last snapshot.
func (v *view) TLSPair(namespace, name string) (certPEM, keyPEM []byte, err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.secrets.Secret(namespace, name)
	if s == nil {
		return nil, nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey], nil
}

// Data implements haproxydriver.Secrets from the last snapshot.
func (v *view) Data(namespace, name string) (map[string][]byte, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	s := v.secrets.Secret(namespace, name)
	if s == nil {
		return nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return s.Data, nil
}

// ConfigMapData implements haproxydriver.ConfigMaps from the last
// snapshot.
func (v *view) ConfigMapData(namespace, name string) (map[string]string, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	cm := v.secrets.ConfigMap(namespace, name)
	if cm == nil {
		return nil, fmt.Errorf("config map %s/%s not found", namespace, name)
	}
	return cm.Data, nil
}

// observe takes a new snapshot before the pipeline stores anything built
// from it (pipeline.Pipeline.Observe).
func (v *view) observe(snap *source.Snapshot) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.secrets = snap
}

// Current implements pipeline.StatusSink.
func (v *view) Current(*source.Snapshot) status.Published {
	v.mu.RLock()
	defer v.mu.RUnlock()
	out := make(status.Published, len(v.published))
	for k, s := range v.published {
		out[k] = s
	}
	return out
}

// Published implements pipeline.StatusReader for the API.
func (v *view) Published(ref model.ObjectRef) []networkingv1.IngressLoadBalancerIngress {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return append([]networkingv1.IngressLoadBalancerIngress(nil), v.published[ref]...)
}

// Publish implements pipeline.StatusSink: the status lives in memory and
// the API serves it, whatever the kind.
func (v *view) Publish(_ context.Context, _ *source.Snapshot, _ map[model.ObjectRef]bool, next status.Published) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	// Logged in key order; only the changed ones are sorted, as a pass
	// after each agent report changes one or none of thousands.
	changed := map[model.ObjectRef]bool{}
	for ref, addrs := range next {
		if !status.Equal(v.published[ref], addrs) {
			changed[ref] = true
		}
	}
	for _, ref := range status.Keys(changed) {
		v.logger.Info(logMessage(ref), logKey(ref), logName(ref), "addresses", status.String(next[ref]))
	}
	v.published = next
	return nil
}

// logMessage, logKey and logName keep the Ingress log line as it was
// ("ingress status updated", ingress=ns/name) and name other kinds fully.
func logMessage(ref model.ObjectRef) string {
	if ref.Kind == model.KindIngress {
		return "ingress status updated"
	}
	return "status updated"
}

func logKey(ref model.ObjectRef) string {
	if ref.Kind == model.KindIngress {
		return "ingress"
	}
	return "object"
}

func logName(ref model.ObjectRef) string {
	if ref.Kind == model.KindIngress {
		return ref.Namespace + "/" + ref.Name
	}
	return ref.String()
}
