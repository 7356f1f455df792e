package render

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxCanaryTotal bounds WeightTotal as translation does.
const maxCanaryTotal = 1000000

// canaryProfile is a policy's model.Canary, validated again.
type canaryProfile struct {
	backend       encode.Word // the canary pool's backend
	weight, total int
	header        encode.Word // req.hdr(<name>), valid when hasHeader
	headerValue   encode.Word // valid when hasValue
	headerPattern encode.Word // valid when hasPattern: a re-written value regex
	hasPattern    bool
	cookie        encode.Word // req.cook(<name>), valid when hasCookie
	hasHeader     bool
	hasValue      bool
	hasCookie     bool
}

func canaryOf(c *model.Canary, uuid string, pools map[string]bool) (*canaryProfile, error) {
	if c == nil {
		return nil, nil
	}
	if !pools[c.PoolID] {
		return nil, fmt.Errorf("canary pool %s does not exist", encode.Printable(c.PoolID))
	}
	if c.WeightTotal < 1 || c.WeightTotal > maxCanaryTotal || c.Weight < 0 || c.Weight > c.WeightTotal {
		return nil, fmt.Errorf("canary weight %d of %d is outside 0-total, total 1-%d", c.Weight, c.WeightTotal, maxCanaryTotal)
	}
	p := &canaryProfile{backend: backendName(uuid, c.PoolID), weight: c.Weight, total: c.WeightTotal}
	if c.Header != "" {
		if p.header = encode.HeaderSample(c.Header); p.header.Err() != nil {
			return nil, fmt.Errorf("canary header: %w", p.header.Err())
		}
		p.hasHeader = true
	}
	if c.HeaderValue != "" {
		v, err := encode.PlainValue(c.HeaderValue)
		if err != nil || !p.hasHeader {
			return nil, errors.Join(errors.New("canary header value without a valid header"), err)
		}
		p.headerValue, p.hasValue = v.Word(), true
	}
	if c.HeaderPattern != "" {
		re, err := encode.ParseValueRegex(c.HeaderPattern)
		if err != nil || !p.hasHeader || p.hasValue {
			return nil, errors.Join(errors.New("canary header pattern without a valid header, or with a header value"), err)
		}
		p.headerPattern, p.hasPattern = re.Word(), true
	}
	if c.Cookie != "" {
		if p.cookie = encode.CookieSample(c.Cookie); p.cookie.Err() != nil {
			return nil, fmt.Errorf("canary cookie: %w", p.cookie.Err())
		}
		p.hasCookie = true
	}
	return p, nil
}

var (
	canaryVar       = encode.Lit("var(txn.pier_canary)")
	canaryChoice    = encode.Lit("set-var(txn.pier_cy)")
	canaryUndecided = encode.Lit("!{")
)

// writeCanary decides, as ingress-nginx does, whether a request of the
// profile goes to the canary: by header ("always", or the header value
// or pattern when one is set; "never" keeps it on the main pool), else by cookie
// ("always" / "never"), else by weight (rand(total) below weight). The
// choice is txn.pier_cy (1 canary, 0 main), and txn.pier_canary names the
// canary backend, which writeCanaryBackend's use_backend reads first.
func writeCanary(c *encode.Config, name encode.Word, p *canaryProfile) {
	is := func(sample, value encode.Word) []encode.Word {
		return []encode.Word{openBrace, sample, encode.Lit("-m"), encode.Lit("str"), value, closeBrace}
	}
	undecided := []encode.Word{canaryUndecided, encode.Lit("var(txn.pier_cy)"), encode.Lit("-m"), encode.Lit("found"), closeBrace}
	choose := func(to int, cond ...encode.Word) {
		c.Line(append([]encode.Word{httpRequest, canaryChoice, encode.Concat(encode.Lit("int("), encode.Num(to), encode.Lit(")")),
			ifWord, name}, cond...)...)
	}
	switch {
	case p.hasValue:
		choose(1, is(p.header, p.headerValue)...)
	case p.hasPattern:
		choose(1, openBrace, p.header, encode.Lit("-m"), encode.Lit("reg"), p.headerPattern, closeBrace)
	case p.hasHeader:
		choose(1, is(p.header, encode.Lit("always"))...)
		choose(0, is(p.header, encode.Lit("never"))...)
	}
	if p.hasCookie {
		choose(1, append(undecided, is(p.cookie, encode.Lit("always"))...)...)
		choose(0, append(undecided, is(p.cookie, encode.Lit("never"))...)...)
	}
	if p.weight > 0 {
		choose(1, append(undecided, openBrace, encode.Concat(encode.Lit("rand("), encode.Num(p.total), encode.Lit(")")),
			encode.Lit("lt"), encode.Num(p.weight), closeBrace)...)
	}
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_canary)"), encode.Concat(encode.Lit("str("), p.backend, encode.Lit(")")),
		ifWord, name, openBrace, encode.Lit("var(txn.pier_cy)"), encode.Lit("-m"), encode.Lit("int"), encode.Num(1), closeBrace)
}

// writeCanaryBackend sends a request the canary took to its backend,
// before any other use_backend.
func writeCanaryBackend(c *encode.Config, ps []*profile) {
	for _, p := range ps {
		if p.canary != nil {
			c.Line(encode.Lit("use_backend"), encode.Lit("%[var(txn.pier_canary)]"), ifWord,
				openBrace, canaryVar, encode.Lit("-m"), encode.Lit("found"), closeBrace)
			return
		}
	}
}
