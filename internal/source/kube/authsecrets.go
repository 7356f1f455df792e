package kube

import (
	"context"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"pier.dev/pier/internal/translate"
)

// authSyncWait bounds how long a snapshot waits for the first list of a
// newly named Secret; after it the Ingress is refused ("not found") until
// the Secret arrives and its event brings a new snapshot.
const authSyncWait = 2 * time.Second

// authSecrets watches the Secrets that Ingresses name in auth-secret
// (with auth-type basic) or proxy-ssl-secret (translate.NamedSecrets), one informer per Secret, selected by name on
// the API server: the TLS informer stays limited to TLS Secrets, and pier
// caches no other Secret of the cluster. A Secret no Ingress names any
// more is dropped from the cache.
type authSecrets struct {
	client  kubernetes.Interface
	changed chan struct{}
	logger  *slog.Logger
	watches map[string]*secretWatch // by "namespace/name"
}

type secretWatch struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	cancel          context.CancelFunc
}

func newAuthSecrets(client kubernetes.Interface, changed chan struct{}, logger *slog.Logger) *authSecrets {
	return &authSecrets{client: client, changed: changed, logger: logger, watches: map[string]*secretWatch{}}
}

// secrets starts watching the Secrets ings name, stops watching the others,
// and returns the named ones that exist (not TLS Secrets: the TLS informer
// has those already).
func (a *authSecrets) secrets(ctx context.Context, ings []*networkingv1.Ingress) []*corev1.Secret {
	wanted := map[string]bool{}
	for _, ing := range ings {
		for _, ref := range translate.NamedSecrets(ing) {
			key := ref.Namespace + "/" + ref.Name
			wanted[key] = true
			if a.watches[key] == nil {
				a.watches[key] = a.start(ctx, ref.Namespace, ref.Name)
			}
		}
	}
	var out []*corev1.Secret
	for key, w := range a.watches {
		if !wanted[key] {
			w.cancel()
			delete(a.watches, key)
			continue
		}
		out = append(out, w.get()...)
	}
	return out
}

func (a *authSecrets) start(ctx context.Context, ns, name string) *secretWatch {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(a.client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	inf := factory.Core().V1().Secrets().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(a.changed) },
		UpdateFunc: func(old, cur any) { notifyIfChanged(a.changed, old, cur) },
		DeleteFunc: func(any) { notify(a.changed) },
	}); err != nil {
		a.logger.Error("watch auth secret", "namespace", ns, "name", name, "error", err)
	}
	factory.Start(ctx.Done())
	wait, done := context.WithTimeout(ctx, authSyncWait)
	defer done()
	if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		a.logger.Warn("auth secret not listed yet", "namespace", ns, "name", name)
	}
	return &secretWatch{namespace: ns, name: name, informer: inf, cancel: cancel}
}

// get is the watched Secret, unless it is missing or a TLS Secret.
func (w *secretWatch) get() []*corev1.Secret {
	list, err := corelisters.NewSecretLister(w.informer.GetIndexer()).Secrets(w.namespace).List(labels.Everything())
	if err != nil {
		return nil
	}
	var out []*corev1.Secret
	for _, s := range list {
		if s.Name == w.name && s.Type != corev1.SecretTypeTLS {
			out = append(out, s)
		}
	}
	return out
}

// stop ends every watch.
func (a *authSecrets) stop() {
	for key, w := range a.watches {
		w.cancel()
		delete(a.watches, key)
	}
}
