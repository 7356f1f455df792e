package cluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/status"
)

// The Service half of the status writer: status.loadBalancer.ingress of
// the Services of type LoadBalancer pier serves with the native provider,
// with the same rules as for Ingresses (only ours, only when it differs,
// conflicts retried on a fresh read, never cleared on shutdown). Service
// and Ingress status carry the same fields under different types; the
// status package decides in the Ingress type and they are converted here.

func toService(in []networkingv1.IngressLoadBalancerIngress) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	for _, a := range in {
		out = append(out, corev1.LoadBalancerIngress{IP: a.IP, Hostname: a.Hostname})
	}
	return out
}

func fromService(in []corev1.LoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	var out []networkingv1.IngressLoadBalancerIngress
	for _, a := range in {
		out = append(out, networkingv1.IngressLoadBalancerIngress{IP: a.IP, Hostname: a.Hostname})
	}
	return out
}

// serviceNeedsWrite reports whether want differs from the Service's
// status and from what this writer wrote on its current version.
func (w *statusWriter) serviceNeedsWrite(svc *corev1.Service, want []networkingv1.IngressLoadBalancerIngress) bool {
	have := fromService(svc.Status.LoadBalancer.Ingress)
	return !status.Equal(have, want) && !w.alreadyWrittenUID(svc.UID, svc.ResourceVersion, want)
}

// publishService writes want into the Service's status; Publish has
// checked that it differs. Safe to run for several Services at once.
func (w *statusWriter) publishService(ctx context.Context, svc *corev1.Service, want []networkingv1.IngressLoadBalancerIngress) {
	key := svc.Namespace + "/" + svc.Name
	if err := w.writeService(ctx, svc, want); err != nil {
		w.logger.Warn("could not write service status", "service", key, "error", err)
		return
	}
	w.logger.Info("service status updated", "service", key, "addresses", status.String(want))
}

func (w *statusWriter) writeService(ctx context.Context, cached *corev1.Service, want []networkingv1.IngressLoadBalancerIngress) error {
	services := w.client.CoreV1().Services(cached.Namespace)
	return writeStatus(ctx, w, "service", cached, want, statusOps[*corev1.Service]{
		get: func(ctx context.Context) (*corev1.Service, error) {
			return services.Get(ctx, cached.Name, metav1.GetOptions{})
		},
		current: func(svc *corev1.Service) []networkingv1.IngressLoadBalancerIngress {
			return fromService(svc.Status.LoadBalancer.Ingress)
		},
		set: func(svc *corev1.Service, want []networkingv1.IngressLoadBalancerIngress) {
			svc.Status.LoadBalancer.Ingress = toService(want)
		},
		update: func(ctx context.Context, svc *corev1.Service) error {
			_, err := services.UpdateStatus(ctx, svc, metav1.UpdateOptions{FieldManager: "pier"})
			return err
		},
	})
}

// serviceRefs indexes the Services of type LoadBalancer by ref.
func serviceRefs(svcs []*corev1.Service) map[model.ObjectRef]*corev1.Service {
	out := map[model.ObjectRef]*corev1.Service{}
	for _, s := range svcs {
		if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			out[model.ObjectRef{Kind: model.KindService, Namespace: s.Namespace, Name: s.Name}] = s
		}
	}
	return out
}
