package render

import (
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strings"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// maxAuthHeaders bounds ResponseHeaders as translation does.
const maxAuthHeaders = 16

// maxAuthCookies is how many Set-Cookie lines of a 2xx auth answer are
// passed to the client (extauth.lua keeps as many).
const maxAuthCookies = 4

// extAuthLua is pier's external-auth action (auth-url). actionMarker is
// replaced by the load balancer's action name, so that load balancers
// packed in one HAProxy process each register their own.
//
//go:embed extauth.lua
var extAuthLua string

const actionMarker = "@ACTION@"

// apr1Lua is pier's Apache MD5 check of basic-auth passwords ($apr1$),
// whose action writeAuth calls; named per load balancer as extAuthLua.
//
//go:embed apr1.lua
var apr1Lua string

// extAuthProfile is a policy's model.ExternalAuth, validated again.
type extAuthProfile struct {
	action     encode.Word // lua.pier_auth_<uuid>
	dst        encode.Word // the auth pool's internal frontend
	host, path encode.Word
	method     encode.Word
	headers    encode.Word   // comma-separated, or "-"
	names      []encode.Word // the same header names, one word each
	signin     encode.Word   // valid when hasSignin
	hasSignin  bool
}

var authMethods = []string{"GET", "HEAD", "POST"}

func (s *sections) extAuthProfile(e *model.ExternalAuth, pools map[string]bool) (*extAuthProfile, error) {
	if e == nil {
		return nil, nil
	}
	if !pools[e.PoolID] {
		return nil, fmt.Errorf("auth pool %s does not exist", encode.Printable(e.PoolID))
	}
	if !slices.Contains(authMethods, e.Method) {
		return nil, fmt.Errorf("auth method %s is not GET, HEAD or POST", encode.Printable(e.Method))
	}
	if len(e.ResponseHeaders) > maxAuthHeaders {
		return nil, fmt.Errorf("%d auth response headers, at most %d", len(e.ResponseHeaders), maxAuthHeaders)
	}
	host, err := encode.Host(e.Host)
	if err != nil {
		return nil, fmt.Errorf("auth host: %w", err)
	}
	path, err := plainPathWord("auth path", e.Path)
	if err != nil {
		return nil, err
	}
	method, _ := encode.Enum(e.Method, authMethods...)
	p := &extAuthProfile{action: encode.ID("lua.pier_auth_", s.uuid), dst: authDst(s.uuid, e.PoolID),
		host: host.Word(), path: path, method: method.Word()}
	var names []encode.Value
	for _, h := range e.ResponseHeaders {
		// Translation's rule again (a store edited by hand): a framing
		// header copied from the auth answer would reframe the request.
		v, err := encode.ModifiableHeader(h)
		if err != nil {
			return nil, fmt.Errorf("auth response header: %w", err)
		}
		names = append(names, v)
		p.names = append(p.names, v.Word())
	}
	if p.headers, err = encode.HeaderList(names); err != nil {
		return nil, err
	}
	if e.SigninURL != "" {
		if p.signin, err = encode.SigninLocation(e.SigninURL); err != nil {
			return nil, fmt.Errorf("auth signin: %w", err)
		}
		p.hasSignin = true
	}
	s.authPools[e.PoolID] = true
	return p, nil
}

// authDst is the abstract socket of an auth pool's internal frontend,
// named after the load balancer and the pool.
func authDst(uuid, poolID string) encode.Word {
	return encode.Concat(encode.Lit("abns@pier-auth-"), encode.ID("", uuid), encode.Lit("-"), encode.ID("", poolID))
}

var authStatus = encode.Lit("var(txn.pier_auth)")

// writeExtAuth asks the auth Service (the Lua action sets txn.pier_auth
// to its status, 0 when it could not be asked, and txn.pier_ah<i> to
// the i-th response header of a 2xx answer), then answers as
// ingress-nginx does: 401 (or 302 to the sign-in URL), 403, or 500 for
// anything but 2xx; a 2xx copies the headers, removing those the answer
// lacks so a client cannot send its own.
func writeExtAuth(c *encode.Config, name encode.Word, p *extAuthProfile) {
	is := func(code int) []encode.Word {
		return []encode.Word{openBrace, authStatus, encode.Lit("-m"), encode.Lit("int"), encode.Num(code), closeBrace}
	}
	c.Line(httpRequest, p.action, p.dst, p.host, p.path, p.method, p.headers, ifWord, name)
	if p.hasSignin {
		c.Line(append([]encode.Word{httpRequest, encode.Lit("redirect"), encode.Lit("location"), p.signin,
			encode.Lit("code"), encode.Num(302), ifWord, name}, is(401)...)...)
	}
	c.Line(append([]encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(401), ifWord, name}, is(401)...)...)
	c.Line(append([]encode.Word{httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(403), ifWord, name}, is(403)...)...)
	c.Line(httpRequest, encode.Lit("deny"), encode.Lit("deny_status"), encode.Num(500), ifWord, name,
		encode.Lit("!{"), authStatus, encode.Lit("-m"), encode.Lit("int"), encode.Lit("200:299"), closeBrace)
	// As ingress-nginx's add_header Set-Cookie $auth_cookie: the auth
	// answer's cookies go to the client with a success or redirect.
	for i := 0; i < maxAuthCookies; i++ {
		v := encode.Concat(encode.Lit("var(txn.pier_ac"), encode.Num(i), encode.Lit(")"))
		c.Line(encode.Lit("http-response"), encode.Lit("add-header"), encode.Lit("Set-Cookie"),
			encode.Concat(encode.Lit("%["), v, encode.Lit("]")), ifWord, name, openBrace, v, encode.Lit("-m"), encode.Lit("found"), closeBrace,
			openBrace, encode.Lit("status"), encode.Lit("200"), encode.Lit("201"), encode.Lit("204"), encode.Lit("206"), encode.Lit("301"),
			encode.Lit("302"), encode.Lit("303"), encode.Lit("304"), encode.Lit("307"), encode.Lit("308"), closeBrace)
	}
	for i, h := range p.names {
		v := encode.Concat(encode.Lit("var(txn.pier_ah"), encode.Num(i), encode.Lit(")"))
		c.Line(httpRequest, encode.Lit("set-header"), h, encode.Concat(encode.Lit("%["), v, encode.Lit("]")), ifWord, name,
			openBrace, v, encode.Lit("-m"), encode.Lit("found"), closeBrace)
		c.Line(httpRequest, encode.Lit("del-header"), h, ifWord, name, encode.Lit("!{"), v, encode.Lit("-m"), encode.Lit("found"), closeBrace)
	}
}

// writeAuthHead renders, first in the fragment, the global section that
// loads the load balancer's Lua file (HAProxy merges global sections;
// the action must be registered before a rule names it).
func writeAuthHead(c *encode.Config, lua encode.Word) {
	c.Blank()
	c.Section(encode.Lit("global"))
	c.Line(encode.Lit("lua-load"), lua)
}

// writeAuthFrontends renders one internal frontend per auth pool
// (writeLuaFrontend).
func writeAuthFrontends(c *encode.Config, s *sections) {
	for _, id := range sortedSet(s.authPools) {
		writeLuaFrontend(c, s.uuid, id, encode.Lit("_auth_"), authDst(s.uuid, id))
	}
}

// writeLuaFrontend renders the internal frontend fe_<uuid><role><id>
// that a Lua action sends its request for pool id to, bound on the
// abstract socket dst: the pool's backend balances and checks as for any
// route. extra lines come before the backend.
func writeLuaFrontend(c *encode.Config, uuid, id string, role, dst encode.Word, extra ...[]encode.Word) {
	c.Blank()
	c.Section(encode.Lit("frontend"), encode.Concat(encode.ID("fe_", uuid), role, encode.ID("", id)))
	c.Line(encode.Lit("mode"), encode.Lit("http"))
	c.Line(encode.Lit("bind"), dst)
	for _, words := range extra {
		c.Line(words...)
	}
	c.Line(encode.Lit("default_backend"), backendName(uuid, id))
	drainRule(c) // every frontend has it (drain_test.go)
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// authLuaFile is the Lua file of a load balancer whose profiles use
// auth-url or custom-http-errors, or nil: the embedded actions each
// needs, named pier_auth_<uuid> and pier_errors_<uuid>.
func authLuaFile(s *sections) ([]byte, error) {
	apr1 := false
	for _, users := range s.byID {
		for _, u := range users {
			apr1 = apr1 || u.Apr1
		}
	}
	if len(s.authPools) == 0 && len(s.errorPools) == 0 && !apr1 {
		return nil, nil
	}
	if err := encode.ID("", s.uuid).Err(); err != nil {
		return nil, err
	}
	if !strings.Contains(extAuthLua, actionMarker) || !strings.Contains(customErrorsLua, actionMarker) || !strings.Contains(apr1Lua, actionMarker) {
		return nil, errors.New("a Lua action has no action marker")
	}
	var out []string
	if len(s.authPools) > 0 {
		out = append(out, strings.ReplaceAll(extAuthLua, actionMarker, "pier_auth_"+s.uuid))
	}
	if len(s.errorPools) > 0 {
		out = append(out, strings.ReplaceAll(customErrorsLua, actionMarker, "pier_errors_"+s.uuid))
	}
	if apr1 {
		out = append(out, strings.ReplaceAll(apr1Lua, actionMarker, "pier_apr1_"+s.uuid))
	}
	return []byte(strings.Join(out, "\n")), nil
}
