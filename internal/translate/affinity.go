package translate

import (
	"pier.dev/pier/internal/model"
)

// applyAffinity sets the pool's cookie affinity from the Ingress that
// creates it (a Service port is one backend: affinityConflict warns the
// others).
func (s *ingressSettings) applyAffinity(pool *model.Pool) { pool.Affinity = s.Affinity.Model() }

// sameAffinity: two pools' affinities are equal.
func sameAffinity(a, b *model.CookieAffinity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
