package annotation

import (
	"fmt"

	"pier.dev/pier/internal/encode"
)

// MaxTries bounds proxy-next-upstream-tries: ten retries after the first
// attempt is already more than any backend should absorb per request.
const MaxTries = 11

// parseTries reads proxy-next-upstream-tries: 1-11 attempts; 0, which
// nginx reads as "no limit" (every member once), becomes the largest.
func parseTries(v string) (int, error) {
	n, err := encode.Int(v, 0, MaxTries)
	if err != nil {
		return 0, fmt.Errorf("proxy-next-upstream-tries: %w", err)
	}
	if n == 0 {
		n = MaxTries
	}
	return n, nil
}
