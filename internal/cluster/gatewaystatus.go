package cluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"

	"pier.dev/pier/internal/apiretry"
	"pier.dev/pier/internal/gatewayfeatures"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/internal/status"
	"pier.dev/pier/internal/translate"
)

// The Gateway API half of the status writer (leader only, as for
// Ingresses): GatewayClass conditions, Gateway conditions, listeners and
// addresses, HTTPRoute, GRPCRoute, TCPRoute and TLSRoute status.parents entries of
// our controllerName. Each
// object's status is merged (status.Merge*: transition times kept,
// other controllers' parent entries and other condition types left as
// they are) and written only when the merge changed it; a conflict is
// retried on a fresh read.

// PublishGateways implements pipeline.GatewayStatusSink.
func (w *statusWriter) PublishGateways(ctx context.Context, snap *source.Snapshot, st *translate.GatewayStatus) error {
	if w.gw == nil || st == nil || snap == nil {
		return nil
	}
	now := metav1.Now().Rfc3339Copy()
	for _, c := range snap.GatewayClasses {
		if want, ok := st.Classes[c.Name]; ok {
			wrote, err := w.writeClass(ctx, c, want, now)
			w.report("gatewayclass", c.Name, wrote, err)
		}
	}
	for _, gw := range snap.Gateways {
		if want, ok := st.Gateways[gatewayRef(model.KindGateway, gw.Namespace, gw.Name)]; ok {
			wrote, err := w.writeGateway(ctx, gw, gatewayWant{Status: want, ListenerSets: st.AttachedListenerSets[gatewayRef(model.KindGateway, gw.Namespace, gw.Name)]}, now)
			w.report("gateway", gw.Namespace+"/"+gw.Name, wrote, err)
		}
	}
	controller := gwv1.GatewayController(w.gatewayController)
	for _, r := range snap.HTTPRoutes {
		want := st.Routes[gatewayRef(model.KindHTTPRoute, r.Namespace, r.Name)]
		if want == nil && !hasParentOf(r.Status.Parents, controller) {
			continue // never ours, or already cleaned
		}
		wrote, err := w.writeRoute(ctx, r, want, controller, now)
		w.report("httproute", r.Namespace+"/"+r.Name, wrote, err)
	}
	for _, r := range snap.GRPCRoutes {
		want := st.Routes[gatewayRef(model.KindGRPCRoute, r.Namespace, r.Name)]
		if want == nil && !hasParentOf(r.Status.Parents, controller) {
			continue
		}
		wrote, err := w.writeGRPCRoute(ctx, r, want, controller, now)
		w.report("grpcroute", r.Namespace+"/"+r.Name, wrote, err)
	}
	w.publishUDPRoutes(ctx, snap, st, controller, now)
	w.publishListenerSets(ctx, snap, st, now)
	for _, r := range snap.TCPRoutes {
		want := st.Routes[gatewayRef(model.KindTCPRoute, r.Namespace, r.Name)]
		if want == nil && !hasParentOf(r.Status.Parents, controller) {
			continue
		}
		wrote, err := w.writeTCPRoute(ctx, r, want, controller, now)
		w.report("tcproute", r.Namespace+"/"+r.Name, wrote, err)
	}
	for _, r := range snap.TLSRoutes {
		want := st.Routes[gatewayRef(model.KindTLSRoute, r.Namespace, r.Name)]
		if want == nil && !hasParentOf(r.Status.Parents, controller) {
			continue
		}
		wrote, err := w.writeTLSRoute(ctx, r, want, controller, now)
		w.report("tlsroute", r.Namespace+"/"+r.Name, wrote, err)
	}
	w.publishGatewayServices(ctx, snap, st)
	for _, p := range snap.BackendTLSPolicies {
		want := st.Policies[gatewayRef(model.KindBackendTLSPolicy, p.Namespace, p.Name)]
		if want == nil && !hasAncestorOf(p.Status.Ancestors, controller) {
			continue
		}
		wrote, err := w.writeBackendTLSPolicy(ctx, p, want, controller, now)
		w.report("backendtlspolicy", p.Namespace+"/"+p.Name, wrote, err)
	}
	return nil
}

func hasAncestorOf(as []gwv1.PolicyAncestorStatus, controller gwv1.GatewayController) bool {
	for _, a := range as {
		if a.ControllerName == controller {
			return true
		}
	}
	return false
}

// writeBackendTLSPolicy merges a policy's ancestors of ours, keeping
// other controllers' entries as they are.
func (w *statusWriter) writeBackendTLSPolicy(ctx context.Context, cached *gwv1.BackendTLSPolicy, want []gwv1.PolicyAncestorStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	policies := w.gw.GatewayV1().BackendTLSPolicies(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1.BackendTLSPolicy, error) {
			return policies.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(p *gwv1.BackendTLSPolicy) bool {
			merged := status.MergePolicyAncestors(p.Status.Ancestors, want, controller, now)
			if status.SameGatewayAPIStatus(merged, p.Status.Ancestors) {
				return false
			}
			p.Status.Ancestors = merged
			return true
		},
		func(ctx context.Context, p *gwv1.BackendTLSPolicy) error {
			_, err := policies.UpdateStatus(ctx, p, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}

func gatewayRef(kind, ns, name string) model.ObjectRef {
	return model.ObjectRef{Kind: kind, Namespace: ns, Name: name}
}

func hasParentOf(ps []gwv1.RouteParentStatus, controller gwv1.GatewayController) bool {
	for _, p := range ps {
		if p.ControllerName == controller {
			return true
		}
	}
	return false
}

// report logs a write or its failure; one object failing must not stop
// the others (the next pass retries it).
func (w *statusWriter) report(kind, key string, wrote bool, err error) {
	switch {
	case err != nil:
		w.logger.Warn("could not write status", "kind", kind, "object", key, "error", err)
	case wrote:
		w.logger.Info("status updated", "kind", kind, "object", key)
	}
}

func (w *statusWriter) writeClass(ctx context.Context, cached *gwv1.GatewayClass, want []metav1.Condition, now metav1.Time) (bool, error) {
	classes := w.gw.GatewayV1().GatewayClasses()
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1.GatewayClass, error) {
			return classes.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(c *gwv1.GatewayClass) bool {
			merged := status.MergeConditions(c.Status.Conditions, want, now)
			features := classFeatures(want)
			if status.SameGatewayAPIStatus(merged, c.Status.Conditions) &&
				status.SameGatewayAPIStatus(features, c.Status.SupportedFeatures) {
				return false
			}
			c.Status.Conditions, c.Status.SupportedFeatures = merged, features
			return true
		},
		func(ctx context.Context, c *gwv1.GatewayClass) error {
			_, err := classes.UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}

// classFeatures is a class's status.supportedFeatures: what pier
// declares (package gatewayfeatures, sorted as the spec requires) for a
// class it accepts, nothing for one it refuses.
func classFeatures(conditions []metav1.Condition) []gwv1.SupportedFeature {
	if !meta.IsStatusConditionTrue(conditions, string(gwv1.GatewayClassConditionStatusAccepted)) {
		return nil
	}
	var out []gwv1.SupportedFeature
	for _, name := range gatewayfeatures.Supported() {
		out = append(out, gwv1.SupportedFeature{Name: gwv1.FeatureName(name)})
	}
	return out
}

func (w *statusWriter) writeGateway(ctx context.Context, cached *gwv1.Gateway, want gatewayWant, now metav1.Time) (bool, error) {
	gateways := w.gw.GatewayV1().Gateways(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1.Gateway, error) {
			return gateways.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(gw *gwv1.Gateway) bool {
			merged := status.MergeGateway(gw.Status, want.Status, now)
			if status.SameGatewayAPIStatus(merged, gw.Status) && w.listenerSetsWritten(cached) == want.ListenerSets {
				return false
			}
			gw.Status = merged
			return true
		},
		func(ctx context.Context, gw *gwv1.Gateway) error {
			return w.updateGatewayStatus(ctx, gw, want.ListenerSets)
		})
}

func (w *statusWriter) writeRoute(ctx context.Context, cached *gwv1.HTTPRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	routes := w.gw.GatewayV1().HTTPRoutes(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1.HTTPRoute, error) {
			return routes.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(r *gwv1.HTTPRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
		func(ctx context.Context, r *gwv1.HTTPRoute) error {
			_, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}

func (w *statusWriter) writeGRPCRoute(ctx context.Context, cached *gwv1.GRPCRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	routes := w.gw.GatewayV1().GRPCRoutes(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1.GRPCRoute, error) {
			return routes.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(r *gwv1.GRPCRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
		func(ctx context.Context, r *gwv1.GRPCRoute) error {
			_, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}

// writeTCPRoute writes a TCPRoute's parents at the version it was read
// at: v1 through the dynamic client (sourcekube.TCPRouteV1), v1alpha2
// through the typed one.
func (w *statusWriter) writeTCPRoute(ctx context.Context, cached *gwv1alpha2.TCPRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	if cached.APIVersion == gwv1.GroupVersion.String() {
		if w.dyn == nil {
			return false, fmt.Errorf("a v1 TCPRoute and no dynamic client to write it")
		}
		routes := w.dyn.Resource(sourcekube.TCPRouteV1).Namespace(cached.Namespace)
		return writeMerged(ctx, w, cached, want,
			func(ctx context.Context) (*gwv1alpha2.TCPRoute, error) {
				u, err := routes.Get(ctx, cached.Name, metav1.GetOptions{})
				if err != nil {
					return nil, err
				}
				return sourcekube.TCPRouteOf(u)
			},
			func(r *gwv1alpha2.TCPRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
			func(ctx context.Context, r *gwv1alpha2.TCPRoute) error {
				u, err := sourcekube.UnstructuredTCPRoute(r)
				if err == nil {
					_, err = routes.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pier"})
				}
				return err
			})
	}
	routes := w.gw.GatewayV1alpha2().TCPRoutes(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1alpha2.TCPRoute, error) {
			return routes.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		func(r *gwv1alpha2.TCPRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
		func(ctx context.Context, r *gwv1alpha2.TCPRoute) error {
			_, err := routes.UpdateStatus(ctx, r, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		})
}

// writeTLSRoute writes a TLSRoute's parents at the version it was read
// at (sourcekube.TLSRouteVersions), through the dynamic client, which
// read it.
func (w *statusWriter) writeTLSRoute(ctx context.Context, cached *gwv1alpha2.TLSRoute, want []gwv1.RouteParentStatus,
	controller gwv1.GatewayController, now metav1.Time) (bool, error) {
	if w.dyn == nil {
		return false, fmt.Errorf("a TLSRoute and no dynamic client to write it")
	}
	gv, err := schema.ParseGroupVersion(cached.APIVersion)
	if err != nil || gv.Group != gwv1.GroupName || gv.Version == "" {
		gv = gwv1alpha2.SchemeGroupVersion
	}
	routes := w.dyn.Resource(sourcekube.TLSRouteResource(gv.Version)).Namespace(cached.Namespace)
	return writeMerged(ctx, w, cached, want,
		func(ctx context.Context) (*gwv1alpha2.TLSRoute, error) {
			u, err := routes.Get(ctx, cached.Name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			return sourcekube.TLSRouteOf(u)
		},
		func(r *gwv1alpha2.TLSRoute) bool { return mergeParents(&r.Status.RouteStatus, want, controller, now) },
		func(ctx context.Context, r *gwv1alpha2.TLSRoute) error {
			u, err := sourcekube.UnstructuredTLSRoute(r)
			if err == nil {
				_, err = routes.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "pier"})
			}
			return err
		})
}

// mergeParents merges want into a route's parent statuses (the
// HTTPRoute's, the GRPCRoute's and the TCPRoute's are the same
// RouteStatus) and reports
// whether that changed them.
func mergeParents(rs *gwv1.RouteStatus, want []gwv1.RouteParentStatus, controller gwv1.GatewayController, now metav1.Time) bool {
	merged := status.MergeRouteParents(rs.Parents, want, controller, now)
	if status.SameGatewayAPIStatus(merged, rs.Parents) {
		return false
	}
	rs.Parents = merged
	return true
}

// writeMerged merges want into an object's status with merge (which
// reports whether anything changed) and writes it: from the cached copy
// first (never mutated), from a fresh read after a conflict, refusing an
// object replaced meanwhile. It reports whether it wrote. What it wrote
// is remembered with the resourceVersion it was written on: while the
// informer still shows that version it has not delivered the write, and
// the same want is not written again (it would only conflict).
func writeMerged[T statusObject](ctx context.Context, w *statusWriter, cached T, want any, get func(context.Context) (T, error),
	merge func(T) bool, update func(context.Context, T) error) (bool, error) {
	if w.gatewayWritten(cached, want) {
		return false, nil
	}
	first, wrote, base := true, false, ""
	err := apiretry.OnConflict(retry.DefaultRetry, func() error {
		obj := cached.DeepCopyObject().(T)
		if !first {
			fresh, err := get(ctx)
			if err != nil {
				return err
			}
			if fresh.GetUID() != cached.GetUID() {
				return fmt.Errorf("replaced meanwhile")
			}
			obj = fresh
		}
		first = false
		wrote = merge(obj)
		if !wrote {
			return nil
		}
		base = obj.GetResourceVersion()
		return update(ctx, obj)
	})
	if apierrors.IsNotFound(err) {
		return false, nil // deleted meanwhile
	}
	if err != nil || !wrote {
		return false, err
	}
	w.mu.Lock()
	w.gwWritten[cached.GetUID()] = gatewayWrite{base: base, want: want}
	w.mu.Unlock()
	return true, nil
}

// gatewayWrite is a Gateway API status write: what was wanted, on which
// resourceVersion.
type gatewayWrite struct {
	base string
	want any
}

func (w *statusWriter) gatewayWritten(cached metav1.Object, want any) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	g, ok := w.gwWritten[cached.GetUID()]
	return ok && g.base == cached.GetResourceVersion() && status.SameGatewayAPIStatus(g.want, want)
}

// gatewayAddresses is what the Gateways of snap publish now, for Decide
// (which keeps it while an update is in flight).
func gatewayAddresses(snap *source.Snapshot, out status.Published) {
	for _, gw := range snap.Gateways {
		if addrs := status.FromGatewayAddresses(gw.Status.Addresses); len(addrs) > 0 {
			out[gatewayRef(model.KindGateway, gw.Namespace, gw.Name)] = addrs
		}
	}
}
