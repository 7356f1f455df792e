package cluster

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/translate"
)

// publishListenerSets writes the status of the ListenerSets naming a
// Gateway of ours. A ListenerSet is read and written at v1 through the
// dynamic client (sourcekube.ListenerSetV1): pier's typed client
// (Gateway API v1.4.1) has no v1 ListenerSet.
func (w *statusWriter) publishListenerSets(ctx context.Context, snap *source.Snapshot, st *translate.GatewayStatus, now metav1.Time) {
	for _, ls := range snap.ListenerSets {
		want, ok := st.ListenerSets[gatewayRef(model.KindListenerSet, ls.Namespace, ls.Name)]
		if !ok {
			continue
		}
		wrote, err := w.writeListenerSet(ctx, ls, want, now)
		w.report("listenerset", ls.Namespace+"/"+ls.Name, wrote, err)
	}
}

func (w *statusWriter) writeListenerSet(ctx context.Context, cached *source.ListenerSet, want translate.ListenerSetStatus, now metav1.Time) (bool, error) {
	if w.dyn == nil {
		return false, fmt.Errorf("a ListenerSet and no dynamic client to write it")
	}
	sets := w.dyn.Resource(sourcekube.ListenerSetV1).Namespace(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*source.ListenerSet, error) {
			u, err := sets.Get(ctx, cached.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return sourcekube.ListenerSetOf(u)
		},
		func(ls *source.ListenerSet) bool {
			merged := mergeListenerSet(ls.Status, want, now)
			if status.SameGatewayAPIStatus(merged, ls.Status) {
				return false
			}
			ls.Status = merged
			return true
		},
		func(ctx context.Context, ls *source.ListenerSet) error {
			u, err := sourcekube.UnstructuredListenerSet(ls)
			if err == nil {
				_, err = sets.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pier"})
			}
			return err
		})
}

// mergeListenerSet is the status a ListenerSet gets: want's conditions
// merged into have's, want's listeners (each one's conditions merged
// with the same-named one's), as MergeGateway does a Gateway's.
func mergeListenerSet(have source.ListenerSetStatus, want translate.ListenerSetStatus, now metav1.Time) source.ListenerSetStatus {
	out := source.ListenerSetStatus{Conditions: status.MergeConditions(have.Conditions, want.Conditions, now)}
	for _, l := range want.Listeners {
		l = *l.DeepCopy()
		var prev []metav1.Condition
		for _, h := range have.Listeners {
			if h.Name == l.Name {
				prev = h.Conditions
			}
		}
		out.Listeners = append(out.Listeners, source.ListenerEntryStatus{Name: l.Name, SupportedKinds: l.SupportedKinds,
			AttachedRoutes: l.AttachedRoutes, Conditions: status.MergeConditions(prev, l.Conditions, now)})
	}
	return out
}

// gatewayWant is what a Gateway's status write carries: its status, and
// status.attachedListenerSets, which pier's v1.4.1 Gateway type has no
// field for. Its fields are exported: the write memo compares wants
// with apiequality, which refuses unexported fields.
type gatewayWant struct {
	Status       gwv1.GatewayStatus
	ListenerSets int32
}

// listenerSetsWritten is the attachedListenerSets last written on the
// Gateway uid: the typed cache cannot show it, so this says whether it
// must be written (0, the field's absence, when never written).
func (w *statusWriter) listenerSetsWritten(cached *gwv1.Gateway) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gwListenerSets[cached.GetUID()]
}

// updateGatewayStatus writes a Gateway's status with its
// attachedListenerSets: through the dynamic client when there is one
// (the typed client would drop the field, which it does not know),
// through the typed one otherwise.
func (w *statusWriter) updateGatewayStatus(ctx context.Context, gw *gwv1.Gateway, listenerSets int32) error {
	if w.dyn == nil {
		_, err := w.gw.GatewayV1().Gateways(gw.Namespace).UpdateStatus(ctx, gw, metav1.UpdateOptions{FieldManager: "pier"})
		return err
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(gw)
	if err != nil {
		return fmt.Errorf("gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(gwv1.GroupVersion.String())
	u.SetKind("Gateway")
	if err := unstructured.SetNestedField(u.Object, int64(listenerSets), "status", "attachedListenerSets"); err != nil {
		return fmt.Errorf("gateway %s/%s: %w", gw.Namespace, gw.Name, err)
	}
	_, err = w.dyn.Resource(gwv1.SchemeGroupVersion.WithResource("gateways")).Namespace(gw.Namespace).
		UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pier"})
	if err == nil {
		w.mu.Lock()
		w.gwListenerSets[gw.GetUID()] = listenerSets
		w.mu.Unlock()
	}
	return err
}
