package render

import (
	_ "embed"
	"fmt"
	"slices"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// customErrorsLua is pier's custom-http-errors action, registered under
// the load balancer's name as extAuthLua is.
//
//go:embed customerrors.lua
var customErrorsLua string

// customErrorsProfile is a policy's model.CustomErrors, validated again.
type customErrorsProfile struct {
	action encode.Word // lua.pier_errors_<uuid>
	dst    encode.Word // the error pool's internal frontend
	codes  []int
	args   []encode.Word // namespace, ingress, service, port
}

func (s *sections) customErrorsProfile(e *model.CustomErrors, pools map[string]bool) (*customErrorsProfile, error) {
	if e == nil {
		return nil, nil
	}
	if !pools[e.PoolID] {
		return nil, fmt.Errorf("custom errors pool %s does not exist", encode.Printable(e.PoolID))
	}
	if len(e.Codes) == 0 || len(e.Codes) > model.MaxCustomErrorCodes {
		return nil, fmt.Errorf("%d custom error codes, want 1-%d", len(e.Codes), model.MaxCustomErrorCodes)
	}
	p := &customErrorsProfile{action: encode.ID("lua.pier_errors_", s.uuid), dst: errorsDst(s.uuid, e.PoolID)}
	for _, c := range e.Codes {
		if c < 400 || c > 599 {
			return nil, fmt.Errorf("custom error code %d is outside 400-599", c)
		}
		if slices.Contains(p.codes, c) {
			return nil, fmt.Errorf("custom error code %d is listed twice", c)
		}
		p.codes = append(p.codes, c)
	}
	slices.Sort(p.codes)
	for _, v := range []string{e.Namespace, e.Ingress, e.Service, e.ServicePort} {
		w, err := encode.ObjectName(v)
		if err != nil {
			return nil, fmt.Errorf("custom errors: %w", err)
		}
		p.args = append(p.args, w)
	}
	s.errorPools[e.PoolID] = true
	return p, nil
}

// errorsDst is the abstract socket of an error pool's internal frontend.
func errorsDst(uuid, poolID string) encode.Word {
	return encode.Concat(encode.Lit("abns@pier-errors-"), encode.ID("", uuid), encode.Lit("-"), encode.ID("", poolID))
}

// writeCustomErrorsRequest saves what the response action needs of the
// request (a response rule cannot read the request's headers): Accept,
// Host and X-Request-ID, before any rule changes them.
func writeCustomErrorsRequest(c *encode.Config, name encode.Word) {
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_ea)"), encode.Lit("req.fhdr(accept)"), ifWord, name)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_eh)"), encode.Lit("req.hdr(host)"), ifWord, name)
	c.Line(httpRequest, encode.Lit("set-var(txn.pier_ei)"), encode.Lit("req.fhdr(x-request-id)"), ifWord, name)
}

// writeCustomErrors runs the action on the profile's answers whose
// status is listed (and only those: the Lua action never sees another).
func writeCustomErrors(c *encode.Config, name encode.Word, p *customErrorsProfile) {
	words := []encode.Word{encode.Lit("http-response"), p.action, p.dst}
	words = append(words, p.args...)
	words = append(words, ifWord, name, openBrace, encode.Lit("status"))
	for _, code := range p.codes {
		words = append(words, encode.Num(code))
	}
	c.Line(append(words, closeBrace)...)
}

// writeErrorFrontends renders one internal frontend per error pool
// (writeLuaFrontend); a server's answer is marked (x-pier-page),
// HAProxy's own (no usable server: 503) is not, so that the action
// keeps the original answer then.
func writeErrorFrontends(c *encode.Config, s *sections) {
	mark := []encode.Word{encode.Lit("http-response"), encode.Lit("set-header"), encode.Lit("x-pier-page"), encode.Lit("1")}
	for _, id := range sortedSet(s.errorPools) {
		writeLuaFrontend(c, s.uuid, id, encode.Lit("_errors_"), errorsDst(s.uuid, id), mark)
	}
}
