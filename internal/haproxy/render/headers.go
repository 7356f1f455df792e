package render

import (
	"errors"
	"fmt"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// headerOp is a model.HeaderOp validated again: the action keyword
// (set-header, add-header, del-header), the name and, but for
// del-header, the value as a log-format word.
type headerOp struct {
	action encode.Word
	name   encode.Word
	value  encode.Word // zero for del-header
}

// maxHeaderOps bounds each list: the Gateway API allows 16 of each of
// set, add and remove per filter.
const maxHeaderOps = 64

func headerOpsOf(what string, ops []model.HeaderOp) ([]headerOp, error) {
	if len(ops) > maxHeaderOps {
		return nil, fmt.Errorf("%s: %d header changes, the limit is %d", encode.Printable(what), len(ops), maxHeaderOps)
	}
	out := make([]headerOp, 0, len(ops))
	for _, op := range ops {
		name, err := encode.ModifiableHeader(op.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", encode.Printable(what), err)
		}
		h := headerOp{name: name.Word()}
		switch op.Op {
		case model.HeaderRemove:
			if op.Value != "" {
				return nil, fmt.Errorf("%s: a value to remove", encode.Printable(what))
			}
			h.action = encode.Lit("del-header")
			out = append(out, h)
			continue
		case model.HeaderSet:
			h.action = encode.Lit("set-header")
		case model.HeaderAdd:
			h.action = encode.Lit("add-header")
		default:
			return nil, fmt.Errorf("%s: header operation %s is not set, add or remove", encode.Printable(what), encode.Printable(string(op.Op)))
		}
		v, err := encode.HeaderSetValue(op.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", encode.Printable(what), err)
		}
		if h.value = v.HeaderSetWord(); h.value.Err() != nil {
			return nil, h.value.Err()
		}
		out = append(out, h)
	}
	return out, nil
}

// writeHeaderOps renders header changes for one profile, in order, on
// the request ("http-request") or the pool's response ("http-response",
// which txn.pier_prof still names).
func writeHeaderOps(c *encode.Config, rule encode.Word, name encode.Word, ops []headerOp) {
	for _, h := range ops {
		words := []encode.Word{rule, h.action, h.name}
		if h.value.Err() == nil {
			words = append(words, h.value)
		}
		c.Line(append(words, ifWord, name)...)
	}
}

// redirectProfile is a model.Redirect validated again: the path change
// applied to the request first (it is answered here, nothing else sees
// it), then the Location composed by encode.RedirectLocation.
type redirectProfile struct {
	location    encode.Word
	code        int
	requestHost bool        // the Location uses the request's host
	fullPath    encode.Word // valid when set
	regex, repl encode.Word // valid for a prefix rewrite
}

func redirectProfileOf(r *model.Redirect) (*redirectProfile, error) {
	if r == nil {
		return nil, nil
	}
	if !slices.Contains(redirectCodes, r.Code) {
		return nil, fmt.Errorf("redirect code %d is not one of 301, 302, 303, 307, 308", r.Code)
	}
	loc, err := encode.RedirectLocation(r.Scheme, r.Host, r.Port)
	if err != nil {
		return nil, fmt.Errorf("redirect: %w", err)
	}
	p := &redirectProfile{location: loc, code: r.Code, requestHost: r.Host == ""}
	switch {
	case r.FullPath != "" && r.PrefixRewrite != nil:
		return nil, errors.New("redirect: both a full path and a prefix rewrite")
	case r.FullPath != "":
		if p.fullPath, err = plainPathWord("redirect path", r.FullPath); err != nil {
			return nil, err
		}
	case r.PrefixRewrite != nil:
		if p.regex, p.repl, err = encode.PrefixReplace(r.PrefixRewrite.Prefix, r.PrefixRewrite.Replacement); err != nil {
			return nil, fmt.Errorf("redirect: %w", err)
		}
	}
	return p, nil
}

// writeRedirect answers a profile's requests with its redirect. The
// request's host is its Host header without the port (an IPv6 literal
// keeps its colons: only ":digits" at the end goes).
func writeRedirect(c *encode.Config, name encode.Word, p *redirectProfile) {
	if p.requestHost {
		c.Line(httpRequest, encode.Lit("set-var("+encode.RedirectHostVar+")"), encode.Lit("req.hdr(host),regsub(:[0-9]+$,)"), ifWord, name)
	}
	switch {
	case p.fullPath.Err() == nil:
		c.Line(httpRequest, encode.Lit("set-path"), p.fullPath, ifWord, name)
	case p.regex.Err() == nil:
		c.Line(httpRequest, encode.Lit("replace-path"), p.regex, p.repl, ifWord, name)
	}
	c.Line(httpRequest, encode.Lit("redirect"), encode.Lit("location"), p.location, encode.Lit("code"), encode.Num(p.code), ifWord, name)
}

// prefixRewriteOf validates a model.PrefixRewrite for replace-path.
func prefixRewriteOf(r *model.PrefixRewrite) (regex, repl encode.Word, err error) {
	if regex, repl, err = encode.PrefixReplace(r.Prefix, r.Replacement); err != nil {
		return encode.Word{}, encode.Word{}, fmt.Errorf("prefix rewrite: %w", err)
	}
	return regex, repl, nil
}

// gatewayFiltersOf validates the options Gateway API filters fill:
// Redirect, the header changes and PrefixRewrite.
func gatewayFiltersOf(p *profile, o *model.PolicyOptions) error {
	var err error
	if p.gwRedirect, err = redirectProfileOf(o.Redirect); err != nil {
		return err
	}
	if p.reqHeaders, err = headerOpsOf("request headers", o.RequestHeaders); err != nil {
		return err
	}
	if p.resHeaders, err = headerOpsOf("response headers", o.ResponseHeaders); err != nil {
		return err
	}
	if o.PrefixRewrite != nil {
		if p.hasRewrite {
			return errors.New("both a rewrite path and a prefix rewrite")
		}
		if p.prefixRegex, p.prefixRepl, err = prefixRewriteOf(o.PrefixRewrite); err != nil {
			return err
		}
		p.hasPrefixRewrite = true
	}
	return nil
}

func (p *profile) hasGatewayFilters() bool {
	return p.gwRedirect != nil || len(p.reqHeaders) > 0 || len(p.resHeaders) > 0 || p.hasPrefixRewrite
}
