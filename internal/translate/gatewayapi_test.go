package translate_test

import (
	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/translate"
)

// The Gateway API translation imports translate, so translate's own tests
// cannot: this external test file hands it to them before they run, for
// fullTranslate to be the pipeline's whole translation.
func init() { translate.GatewaysForTest = gatewayapi.Translate }
