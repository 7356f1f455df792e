package translate

import (
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// resolveFallback makes the pool of the default-backend annotation's
// Service, on its first port (spec.ports[0]): the Service that answers
// this Ingress's requests when a route's own Service has no usable
// member. A missing Service, or one without ports, is a warning: the
// annotation is then ignored and the routes answer 503 as before.
func (p *parsedIngress) resolveFallback(x *index, opts Options, problems *[]model.Problem) error {
	name := p.settings.DefaultBackend
	if name == "" {
		return nil
	}
	key := annotation.KeyOf(p.ing.Annotations, "default-backend")
	field := fieldForAnnotation(key)
	svc := x.services[p.ing.Namespace+"/"+name]
	if svc == nil || len(svc.Spec.Ports) == 0 {
		*problems = append(*problems, warning(p.ing, "ServiceNotFound", field,
			"%s: service %s/%s not found or without ports: ignored, routes without members answer 503",
			annotation.QuoteForMessage(key), p.ing.Namespace, name))
		return nil
	}
	port := networkingv1.ServiceBackendPort{Name: svc.Spec.Ports[0].Name}
	if port.Name == "" {
		port = networkingv1.ServiceBackendPort{Number: svc.Spec.Ports[0].Port}
	}
	b := &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: name, Port: port}}
	pool, err := p.backendPool(b, field, x, opts, problems)
	if err != nil {
		return err
	}
	p.fallbackPool = pool
	return nil
}

// fallbackFor is the route's model.DefaultBackend, or nil when the
// Ingress has none or the route already goes to that Service.
func (p *parsedIngress) fallbackFor(r route) *model.DefaultBackend {
	if p.fallbackPool == nil || r.poolID == p.fallbackPool.ID {
		return nil
	}
	return &model.DefaultBackend{PoolID: p.fallbackPool.ID, RoutePoolID: r.poolID}
}
