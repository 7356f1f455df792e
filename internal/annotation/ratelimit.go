package annotation

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxRateLimit bounds limit-rps, limit-rpm and limit-connections: far
// above what one client address should be allowed, and a plain int in
// HAProxy's comparisons.
const maxRateLimit = 1000000

// RateLimit are limit-rps, limit-rpm and limit-connections; 0 is
// off, as in ingress-nginx.
type RateLimit struct {
	RPS, RPM, Connections int
}

// parseRateLimit reads a whole number, 0 (off) to maxRateLimit.
func parseRateLimit(name, v string) (int, error) {
	n, err := encode.Int(v, 0, maxRateLimit)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

// model is the policy's RateLimit, nil when no limit is set.
func (r RateLimit) Model() *model.RateLimit {
	if r.RPS == 0 && r.RPM == 0 && r.Connections == 0 {
		return nil
	}
	return &model.RateLimit{RequestsPerSecond: r.RPS, RequestsPerMinute: r.RPM, Connections: r.Connections}
}

// rateLimitDifference is how the request limits differ from ingress-nginx.
const rateLimitDifference = "at most this many accepted requests per client address in any sliding second (minute for limit-rpm), " +
	"with no burst on top (ingress-nginx also lets a burst of limit x limit-burst-multiplier, default 5, through); the excess gets 503"
