package kube

import (
	"context"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"pier.dev/pier/internal/translate"
)

// namedConfigMaps watches the ConfigMaps that Ingresses name in
// custom-headers (translate.NamedConfigMaps), one informer per ConfigMap,
// selected by name on the API server, as authSecrets does for Secrets:
// pier caches no other ConfigMap of the cluster (dashboards and scripts
// can be megabytes). A ConfigMap no Ingress names any more is dropped.
type namedConfigMaps struct {
	client  kubernetes.Interface
	changed chan struct{}
	logger  *slog.Logger
	watches map[string]*configMapWatch // by "namespace/name"
}

type configMapWatch struct {
	namespace, name string
	informer        cache.SharedIndexInformer
	cancel          context.CancelFunc
}

func newNamedConfigMaps(client kubernetes.Interface, changed chan struct{}, logger *slog.Logger) *namedConfigMaps {
	return &namedConfigMaps{client: client, changed: changed, logger: logger, watches: map[string]*configMapWatch{}}
}

// configMaps starts watching the ConfigMaps ings name, stops watching the
// others, and returns the named ones that exist.
func (n *namedConfigMaps) configMaps(ctx context.Context, ings []*networkingv1.Ingress) []*corev1.ConfigMap {
	wanted := map[string]bool{}
	for _, ing := range ings {
		for _, ref := range translate.NamedConfigMaps(ing) {
			key := ref.Namespace + "/" + ref.Name
			wanted[key] = true
			if n.watches[key] == nil {
				n.watches[key] = n.start(ctx, ref.Namespace, ref.Name)
			}
		}
	}
	var out []*corev1.ConfigMap
	for key, w := range n.watches {
		if !wanted[key] {
			w.cancel()
			delete(n.watches, key)
			continue
		}
		out = append(out, w.get()...)
	}
	return out
}

func (n *namedConfigMaps) start(ctx context.Context, ns, name string) *configMapWatch {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactoryWithOptions(n.client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify(n.changed) },
		UpdateFunc: func(old, cur any) { notifyIfChanged(n.changed, old, cur) },
		DeleteFunc: func(any) { notify(n.changed) },
	}); err != nil {
		n.logger.Error("watch config map", "namespace", ns, "name", name, "error", err)
	}
	factory.Start(ctx.Done())
	wait, done := context.WithTimeout(ctx, authSyncWait)
	defer done()
	if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		n.logger.Warn("config map not listed yet", "namespace", ns, "name", name)
	}
	return &configMapWatch{namespace: ns, name: name, informer: inf, cancel: cancel}
}

// get is the watched ConfigMap, unless it is missing.
func (w *configMapWatch) get() []*corev1.ConfigMap {
	cm, err := corelisters.NewConfigMapLister(w.informer.GetIndexer()).ConfigMaps(w.namespace).Get(w.name)
	if err != nil {
		return nil
	}
	return []*corev1.ConfigMap{cm}
}

// stop ends every watch.
func (n *namedConfigMaps) stop() {
	for key, w := range n.watches {
		w.cancel()
		delete(n.watches, key)
	}
}
