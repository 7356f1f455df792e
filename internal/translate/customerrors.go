package translate

import (
	"slices"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// checkCustomErrors warns when custom-http-errors has no error pool to
// ask: pier has no controller-wide default backend, so the annotation
// needs default-backend (a Service that exists, with a port). Without
// one the backend's own answers pass unchanged.
func (p *parsedIngress) checkCustomErrors(problems *[]model.Problem) {
	if len(p.settings.CustomErrors) == 0 || p.fallbackPool != nil {
		return
	}
	key := annotation.KeyOf(p.ing.Annotations, "custom-http-errors")
	*problems = append(*problems, warning(p.ing, "IgnoredAnnotation", fieldForAnnotation(key),
		"%s: needs a usable default-backend annotation (pier has no controller-wide default backend): ignored, "+
			"the backends' error answers pass unchanged", annotation.QuoteForMessage(key)))
}

// customErrorsFor is the route's model.CustomErrors, or nil when the
// Ingress has no custom-http-errors, no default-backend pool, or the
// route goes to that pool itself.
func (p *parsedIngress) customErrorsFor(r route) *model.CustomErrors {
	codes := p.settings.CustomErrors
	if len(codes) == 0 || p.fallbackPool == nil || r.poolID == p.fallbackPool.ID {
		return nil
	}
	pool := p.pools[r.poolID]
	if pool == nil {
		return nil
	}
	return &model.CustomErrors{PoolID: p.fallbackPool.ID, Codes: slices.Clone(codes), Namespace: pool.Namespace,
		Ingress: p.ing.Name, Service: pool.Service, ServicePort: pool.Port}
}
