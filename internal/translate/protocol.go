package translate

import (
	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
)

// applyProtocol sets the pool's protocol from the Ingress that creates
// it (a Service port is one backend: protocolConflict warns the others).
// The pool's UpstreamTLS is a copy, its name defaulting to the Service's.
func (s *ingressSettings) applyProtocol(pool *model.Pool) {
	pool.Protocol = s.BackendProtocol
	if r := s.upstreamTLS; r != nil && annotation.TLSProtocol(pool.Protocol) {
		u := *r
		if u.Name == "" && (u.Verify || u.SNI) {
			u.Name = defaultUpstreamName(pool)
		}
		pool.UpstreamTLS = &u
	}
}
