package translate

import (
	"fmt"
	"slices"
	"strings"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// parseCustomHTTPErrors accepts ingress-nginx's custom-http-errors: a
// comma-separated list of 3-digit statuses, 400-599 (spaces around a
// code are allowed), at most model.MaxCustomErrorCodes distinct ones.
// A code listed twice counts once.
func parseCustomHTTPErrors(v string) ([]int, error) {
	if strings.Trim(v, " ") == "" {
		return nil, fmt.Errorf("custom-http-errors %s: a comma-separated list of statuses 400-599", quoteForMessage(v))
	}
	var codes []int
	for _, part := range strings.Split(v, ",") {
		c := strings.Trim(part, " ")
		if len(c) != 3 || c[0] < '4' || c[0] > '5' || c[1] < '0' || c[1] > '9' || c[2] < '0' || c[2] > '9' {
			return nil, fmt.Errorf("custom-http-errors %s: %s is not a status 400-599", quoteForMessage(v), quoteForMessage(c))
		}
		n := int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
		if !slices.Contains(codes, n) {
			codes = append(codes, n)
		}
		if len(codes) > model.MaxCustomErrorCodes {
			return nil, fmt.Errorf("custom-http-errors %s: more than %d statuses", quoteForMessage(v), model.MaxCustomErrorCodes)
		}
	}
	slices.Sort(codes)
	return codes, nil
}

// checkCustomErrors warns when custom-http-errors has no error pool to
// ask: pier has no controller-wide default backend, so the annotation
// needs default-backend (a Service that exists, with a port). Without
// one the backend's own answers pass unchanged.
func (p *parsedIngress) checkCustomErrors(problems *[]model.Problem) {
	if len(p.settings.customErrors) == 0 || p.fallbackPool != nil {
		return
	}
	key := annotation.KeyOf(p.ing.Annotations, "custom-http-errors")
	*problems = append(*problems, warning(p.ing, "IgnoredAnnotation", fieldForAnnotation(key),
		"%s: needs a usable default-backend annotation (pier has no controller-wide default backend): ignored, "+
			"the backends' error answers pass unchanged", quoteForMessage(key)))
}

// customErrorsFor is the route's model.CustomErrors, or nil when the
// Ingress has no custom-http-errors, no default-backend pool, or the
// route goes to that pool itself.
func (p *parsedIngress) customErrorsFor(r route) *model.CustomErrors {
	codes := p.settings.customErrors
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

// customErrorsDifference is how custom-http-errors differs from
// ingress-nginx.
const customErrorsDifference = "needs the default-backend annotation (pier has no controller-wide default backend; " +
	"without it the annotation is ignored with a warning); the client gets the original status with the error " +
	"backend's body and Content-Type only (ingress-nginx passes the error backend's whole answer, its status included); " +
	"X-Request-ID is the request's own, when it has one; if the error backend cannot answer, the original answer is kept"
