package render

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// Bounds of a split, as translation's: the Gateway API's 16 backendRefs
// of a rule, weights up to 1,000,000 each, and rand() a 32-bit range.
const (
	maxSplitPools  = 16
	maxSplitWeight = 1000000
	maxSplitTotal  = 1 << 30
)

// splitProfile is a policy's model.Split, validated again: each pool's
// backend and the end of its range in rand(total); fail (the last part
// of the range) is answered 500.
type splitProfile struct {
	backends []encode.Word
	ends     []int
	total    int
	fail     bool
}

func splitOf(s *model.Split, uuid string, pools map[string]bool) (*splitProfile, error) {
	if s == nil {
		return nil, nil
	}
	if len(s.Pools) < 1 || len(s.Pools) > maxSplitPools {
		return nil, fmt.Errorf("split of %d pools, 1-%d are accepted", len(s.Pools), maxSplitPools)
	}
	if s.FailWeight < 0 || s.FailWeight > maxSplitTotal {
		return nil, fmt.Errorf("split fail weight %d is outside 0-%d", s.FailWeight, maxSplitTotal)
	}
	p := &splitProfile{fail: s.FailWeight > 0}
	for _, share := range s.Pools {
		if !pools[share.PoolID] {
			return nil, fmt.Errorf("split pool %s does not exist", encode.Printable(share.PoolID))
		}
		if share.Weight < 1 || share.Weight > maxSplitWeight {
			return nil, fmt.Errorf("split weight %d is outside 1-%d", share.Weight, maxSplitWeight)
		}
		p.total += share.Weight
		p.backends = append(p.backends, backendName(uuid, share.PoolID))
		p.ends = append(p.ends, p.total)
	}
	p.total += s.FailWeight
	if p.total > maxSplitTotal {
		return nil, errors.New("split weights add up to more than 2^30")
	}
	return p, nil
}

var (
	splitPick = encode.Lit("var(txn.pier_sp)")
	splitVar  = encode.Lit("var(txn.pier_split)")
)

// writeSplit draws rand(total) once per request of the profile
// (txn.pier_sp) and names the backend whose range holds it in
// txn.pier_split, which writeSplitBackend's use_backend reads; the fail
// range is answered 500, as a pool's fail share is.
func writeSplit(c *encode.Config, name encode.Word, p *splitProfile) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_sp)"), encode.Concat(encode.Lit("rand("), encode.Num(p.total), encode.Lit(")")),
		ifWord, name)
	start := 0
	for i, be := range p.backends {
		c.Line(httpRequest, encode.Lit("set-var(txn.pier_split)"), encode.Concat(encode.Lit("str("), be, encode.Lit(")")),
			ifWord, name, openBrace, splitPick, encode.Lit("-m"), encode.Lit("int"), encode.Lit("ge"), encode.Num(start), closeBrace,
			openBrace, splitPick, encode.Lit("-m"), encode.Lit("int"), encode.Lit("lt"), encode.Num(p.ends[i]), closeBrace)
		start = p.ends[i]
	}
	if p.fail {
		c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(500), ifWord, name,
			openBrace, splitPick, encode.Lit("-m"), encode.Lit("int"), encode.Lit("ge"), encode.Num(start), closeBrace)
	}
}

// writeSplitBackend sends a request a split chose to its backend, before
// the route's own use_backend.
func writeSplitBackend(c *encode.Config, ps []*profile) {
	for _, p := range ps {
		if p.split != nil {
			c.Line(encode.Lit("use_backend"), encode.Lit("%[var(txn.pier_split)]"), ifWord,
				openBrace, splitVar, encode.Lit("-m"), encode.Lit("found"), closeBrace)
			return
		}
	}
}
