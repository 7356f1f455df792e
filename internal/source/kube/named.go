package kube

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"pier.dev/pier/internal/annotation"
)

// namedSyncWait bounds how long a snapshot waits for the first list of a
// newly named object; after it the Ingress is refused ("not found") until
// the object arrives and its event brings a new snapshot.
const namedSyncWait = 2 * time.Second

// namedWatches watches the objects of one kind that Ingresses name in
// annotations, one informer per object, selected by name on the API
// server, so that pier caches no other object of that kind in the cluster
// (Secrets are credentials; ConfigMaps can be megabytes). An object no
// Ingress names any more is dropped from the cache.
type namedWatches[T metav1.Object] struct {
	client  kubernetes.Interface
	changed chan struct{}
	logger  *slog.Logger
	kind    string // in log lines
	// named are the objects an Ingress names; informer makes the
	// informer of the kind from a factory limited to one object; keep
	// says whether a listed object is served (nil: every one).
	named    func(*networkingv1.Ingress) []annotation.Object
	informer func(informers.SharedInformerFactory) cache.SharedIndexInformer
	keep     func(T) bool
	watches  map[string]*namedWatch // by "namespace/name"
}

type namedWatch struct {
	informer cache.SharedIndexInformer
	cancel   context.CancelFunc
}

// newAuthSecrets watches the Secrets that Ingresses name in auth-secret
// (with auth-type basic) or proxy-ssl-secret (annotation.Secrets).
// The TLS informer stays limited to TLS Secrets, which it has already,
// so those are left out here.
func newAuthSecrets(client kubernetes.Interface, changed chan struct{}, logger *slog.Logger) *namedWatches[*corev1.Secret] {
	return &namedWatches[*corev1.Secret]{client: client, changed: changed, logger: logger, kind: "secret",
		named: annotation.Secrets,
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().Secrets().Informer()
		},
		keep:    func(s *corev1.Secret) bool { return s.Type != corev1.SecretTypeTLS },
		watches: map[string]*namedWatch{}}
}

// newNamedConfigMaps watches the ConfigMaps that Ingresses name in
// custom-headers (annotation.ConfigMaps); its objectsNamed, any others
// (newFrontendCAs).
func newNamedConfigMaps(client kubernetes.Interface, changed chan struct{}, logger *slog.Logger) *namedWatches[*corev1.ConfigMap] {
	return &namedWatches[*corev1.ConfigMap]{client: client, changed: changed, logger: logger, kind: "config map",
		named: annotation.ConfigMaps,
		informer: func(f informers.SharedInformerFactory) cache.SharedIndexInformer {
			return f.Core().V1().ConfigMaps().Informer()
		},
		watches: map[string]*namedWatch{}}
}

// newPolicyConfigMaps watches the ConfigMaps that BackendTLSPolicies
// name in caCertificateRefs (source.BackendTLSCAConfigMaps), as
// Ingresses' are.
func newPolicyConfigMaps(client kubernetes.Interface, changed chan struct{}, logger *slog.Logger) *namedWatches[*corev1.ConfigMap] {
	n := newNamedConfigMaps(client, changed, logger)
	n.named = nil // named by policies, through objectsNamed
	return n
}

// objects starts watching the objects ings name, stops watching the
// others, and returns the named ones that exist and are kept.
func (n *namedWatches[T]) objects(ctx context.Context, ings []*networkingv1.Ingress) []T {
	var refs []annotation.Object
	for _, ing := range ings {
		refs = append(refs, n.named(ing)...)
	}
	return n.objectsNamed(ctx, refs)
}

// objectsNamed starts watching the objects of refs, stops watching the
// others, and returns those of refs that exist and are kept.
func (n *namedWatches[T]) objectsNamed(ctx context.Context, refs []annotation.Object) []T {
	wanted := map[string]bool{}
	for _, ref := range refs {
		key := ref.Namespace + "/" + ref.Name
		wanted[key] = true
		if n.watches[key] == nil {
			n.watches[key] = n.start(ctx, ref)
		}
	}
	var out []T
	for key, w := range n.watches {
		if !wanted[key] {
			w.cancel()
			delete(n.watches, key)
			continue
		}
		obj, ok, err := w.informer.GetIndexer().GetByKey(key)
		if err != nil || !ok {
			continue
		}
		if t, ok := obj.(T); ok && (n.keep == nil || n.keep(t)) {
			out = append(out, t)
		}
	}
	return out
}

func (n *namedWatches[T]) start(ctx context.Context, ref annotation.Object) *namedWatch {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithNamespace(ref.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + ref.Name }))
	inf := n.informer(factory)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(n.changed) },
		UpdateFunc: func(old, cur any) { notifyIfChanged(n.changed, old, cur) },
		DeleteFunc: func(any) { notify(n.changed) },
	}); err != nil {
		n.logger.Error("watch "+n.kind, "namespace", ref.Namespace, "name", ref.Name, "error", err)
	}
	factory.Start(ctx.Done())
	wait, done := context.WithTimeout(ctx, namedSyncWait)
	defer done()
	if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		n.logger.Warn(n.kind+" not listed yet", "namespace", ref.Namespace, "name", ref.Name)
	}
	return &namedWatch{informer: inf, cancel: cancel}
}

// stop ends every watch.
func (n *namedWatches[T]) stop() {
	for key, w := range n.watches {
		w.cancel()
		delete(n.watches, key)
	}
}
