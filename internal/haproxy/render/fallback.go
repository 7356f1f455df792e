package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// fallbackProfile is a policy's model.DefaultBackend, validated again:
// both pools must be the load balancer's.
type fallbackProfile struct {
	backend encode.Word // the default-backend Service's
	route   encode.Word // the policy's own, whose members are counted
}

func fallbackOf(d *model.DefaultBackend, uuid string, pools map[string]bool) (*fallbackProfile, error) {
	if d == nil {
		return nil, nil
	}
	for _, id := range []string{d.PoolID, d.RoutePoolID} {
		if !pools[id] {
			return nil, fmt.Errorf("default backend pool %s does not exist", encode.Printable(id))
		}
	}
	if d.PoolID == d.RoutePoolID {
		return nil, fmt.Errorf("default backend pool %s is the route's own", encode.Printable(d.PoolID))
	}
	return &fallbackProfile{backend: backendName(uuid, d.PoolID), route: backendName(uuid, d.RoutePoolID)}, nil
}

var fallbackVar = encode.Lit("var(txn.pier_fb)")

// writeFallback sends the profile's requests to the default backend
// while the route's backend has no usable server (nbsrv counts the
// servers up and not in maintenance: empty slots are in maintenance),
// unless the canary took the request.
func writeFallback(c *encode.Config, name encode.Word, p *fallbackProfile) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_fb)"), encode.Concat(encode.Lit("str("), p.backend, encode.Lit(")")),
		ifWord, name, openBrace, encode.Concat(encode.Lit("nbsrv("), p.route, encode.Lit(")")), encode.Lit("eq"), encode.Num(0), closeBrace,
		canaryUndecided, canaryVar, encode.Lit("-m"), encode.Lit("found"), closeBrace)
}

// writeFallbackBackend sends a request writeFallback chose to its
// backend, before any other use_backend.
func writeFallbackBackend(c *encode.Config, ps []*profile) {
	for _, p := range ps {
		if p.fallback != nil {
			c.Line(encode.Lit("use_backend"), encode.Lit("%[var(txn.pier_fb)]"), ifWord,
				openBrace, fallbackVar, encode.Lit("-m"), encode.Lit("found"), closeBrace)
			return
		}
	}
}
