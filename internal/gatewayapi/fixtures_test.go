package gatewayapi

import "pier.dev/pier/internal/fixture"

// The objects the Gateway API tests share with translate's
// (internal/fixture), by the names these tests use.
var (
	epoch        = fixture.Epoch
	backend      = fixture.Backend
	rulesMatch   = fixture.RulesMatch
	tlsSecretFor = fixture.TLSSecret
)
