package gatewayapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// ruleSettings are what an HTTPRouteRule asks of its pool besides its
// backends: timeouts, retry and sessionPersistence. HAProxy 2.6 sets
// them per backend (http-request set-timeout needs a backend; retries,
// retry-on and cookie are backend keywords), so a rule with any of them
// gets a pool of its own, which no Ingress or other rule shares unless
// it asks the same.
type ruleSettings struct {
	// Server is the backend's timeout server: the longest HAProxy waits
	// for the member's answer (or between two parts of it); 0: unset.
	Server time.Duration `json:"server,omitempty"`
	// Connect is the backend's timeout connect when Server is shorter
	// than the defaults' (5s): a member that drops SYNs must not keep a
	// request past its timeout either. 0 keeps the defaults'.
	Connect time.Duration `json:"connect,omitempty"`
	// Tries is model.Pool.Tries; 0 keeps the defaults' retries.
	Tries         int                   `json:"tries,omitempty"`
	RetryStatuses []int                 `json:"retryStatuses,omitempty"`
	RetryTimeout  bool                  `json:"retryTimeout,omitempty"`
	Affinity      *model.CookieAffinity `json:"affinity,omitempty"`
	// Deadline is model.Pool.Deadline: the request timeout when the rule
	// retries, which no attempt's timeout server can bound.
	Deadline time.Duration `json:"deadline,omitempty"`
}

// maxRuleTimeout is the longest timeout a rule gets, and what "0s" (no
// timeout, which HAProxy only has with a warning) becomes: render's bound.
const maxRuleTimeout = 24 * time.Hour

// defaultConnectTimeout is render's default timeout connect.
const defaultConnectTimeout = 5 * time.Second

// maxRetryAttempts bounds retry.attempts: pool tries are at most 11.
const maxRetryAttempts = translate.MaxTries - 1

// gepDuration is GEP-2257's Duration: 1-4 parts of 1-5 digits and a unit.
var gepDuration = regexp.MustCompile(`^([0-9]{1,5}(h|m|s|ms)){1,4}$`)

// parseGEPDuration reads a Gateway API Duration strictly (no fractions,
// signs, spaces or other units).
func parseGEPDuration(d gwv1.Duration) (time.Duration, error) {
	s := string(d)
	if !gepDuration.MatchString(s) {
		return 0, fmt.Errorf("duration %s is not a Gateway API duration (e.g. 10s, 1m30s, 500ms)", translate.Quote(s))
	}
	return time.ParseDuration(s)
}

func (s ruleSettings) zero() bool {
	return s.Server == 0 && s.Connect == 0 && s.Tries == 0 && len(s.RetryStatuses) == 0 && !s.RetryTimeout && s.Affinity == nil &&
		s.Deadline == 0
}

// parseRuleSettings reads a rule's timeouts, retry and
// sessionPersistence; any value pier cannot honour refuses the route.
func parseRuleSettings(field string, rule gwv1.HTTPRouteRule, r *gwv1.HTTPRoute, index int) (ruleSettings, *routeRefusal) {
	var s ruleSettings
	request, backend, refusal := parseTimeouts(field+".timeouts", rule.Timeouts)
	if refusal != nil {
		return s, refusal
	}
	s.Server = serverTimeout(request, backend)
	if s.Server > 0 && s.Server < defaultConnectTimeout {
		s.Connect = s.Server
	}
	if refusal := s.parseRetry(field+".retry", rule.Retry, request, backend); refusal != nil {
		return s, refusal
	}
	if rule.Retry != nil && request > 0 {
		s.Deadline = request
	}
	if rule.SessionPersistence != nil {
		a, refusal := parseSessionPersistence(field+".sessionPersistence", rule.SessionPersistence, r, index)
		if refusal != nil {
			return s, refusal
		}
		s.Affinity = a
	}
	return s, nil
}

// parseTimeouts returns request and backendRequest: -1 when unset, 0 for
// no timeout.
func parseTimeouts(field string, t *gwv1.HTTPRouteTimeouts) (time.Duration, time.Duration, *routeRefusal) {
	request, backend := time.Duration(-1), time.Duration(-1)
	if t == nil {
		return request, backend, nil
	}
	for _, f := range []struct {
		name string
		in   *gwv1.Duration
		out  *time.Duration
	}{{"request", t.Request, &request}, {"backendRequest", t.BackendRequest, &backend}} {
		if f.in == nil {
			continue
		}
		d, err := parseGEPDuration(*f.in)
		if err != nil {
			return 0, 0, &routeRefusal{field + "." + f.name, err.Error()}
		}
		if d > maxRuleTimeout {
			return 0, 0, &routeRefusal{field + "." + f.name, fmt.Sprintf("%s is longer than pier's longest timeout, 24h (0s is no timeout)", *f.in)}
		}
		*f.out = d
	}
	if request > 0 && backend > request {
		return 0, 0, &routeRefusal{field + ".backendRequest", "backendRequest timeout cannot be longer than request timeout"}
	}
	return request, backend, nil
}

// serverTimeout is the backend's timeout server: backendRequest bounds
// each attempt, else request bounds the one attempt; a timeout of 0 is
// the longest pier sets. Unset both: the defaults' (0).
func serverTimeout(request, backend time.Duration) time.Duration {
	switch {
	case backend > 0:
		return backend
	case request > 0:
		return request
	case request == 0 || backend == 0:
		return maxRuleTimeout
	}
	return 0
}

// parseRetry maps retry onto HAProxy's retries and retry-on. Connection
// failures and empty responses are retried as the spec asks; a response
// timeout only when backendRequest bounds each attempt (then as many
// attempts as fit in request, so the whole stays within it).
func (s *ruleSettings) parseRetry(field string, r *gwv1.HTTPRouteRetry, request, backend time.Duration) *routeRefusal {
	if r == nil {
		return nil
	}
	if r.Attempts != nil {
		if *r.Attempts < 0 {
			return &routeRefusal{field + ".attempts", fmt.Sprintf("%d retries is negative", *r.Attempts)}
		}
		// attempts is a most: more than pier's bound is served as the
		// bound (one request never costs more than 11 connections),
		// rather than refusing a route whose author meant "keep trying".
		s.Tries = min(*r.Attempts, maxRetryAttempts) + 1
	}
	if r.Backoff != nil {
		d, err := parseGEPDuration(*r.Backoff)
		if err != nil {
			return &routeRefusal{field + ".backoff", err.Error()}
		}
		if d > 0 {
			return &routeRefusal{field + ".backoff", "HAProxy 2.6 cannot wait a chosen time between retries (only 0s is served)"}
		}
	}
	for i, c := range r.Codes {
		if !retryableStatus(int(c)) {
			return &routeRefusal{fmt.Sprintf("%s.codes[%d]", field, i),
				fmt.Sprintf("HAProxy 2.6 retries on 401, 403, 404, 408, 425 and 500-504 only, not %d", c)}
		}
		s.RetryStatuses = append(s.RetryStatuses, int(c))
	}
	slices.Sort(s.RetryStatuses)
	s.RetryStatuses = slices.Compact(s.RetryStatuses)
	if backend > 0 {
		s.RetryTimeout = true
		if request > 0 {
			fit := max(1, int(request/backend))
			if s.Tries == 0 || s.Tries > fit {
				s.Tries = min(fit, translate.MaxTries)
			}
		}
	}
	return nil
}

func retryableStatus(c int) bool {
	switch c {
	case 401, 403, 404, 408, 425, 500, 501, 502, 503, 504:
		return true
	}
	return false
}

// parseSessionPersistence maps cookie persistence onto the pool's cookie
// affinity: the cookie named sessionName (else one per route rule), a
// session cookie, or with lifetimeType Permanent one whose Max-Age is
// absoluteTimeout. HAProxy tracks the timeouts in the cookie's value
// (maxlife: absoluteTimeout; maxidle: idleTimeout) and ignores, then
// replaces, a cookie past either.
func parseSessionPersistence(field string, sp *gwv1.SessionPersistence, r *gwv1.HTTPRoute, index int) (*model.CookieAffinity, *routeRefusal) {
	if sp.Type != nil && *sp.Type != gwv1.CookieBasedSessionPersistence {
		return nil, &routeRefusal{field + ".type", fmt.Sprintf("%s session persistence is not supported (only Cookie)", translate.Quote(string(*sp.Type)))}
	}
	a := &model.CookieAffinity{Name: "pier_" + model.ID("gateway-session", r.Namespace, r.Name, strconv.Itoa(index))[:12]}
	if sp.SessionName != nil {
		if _, err := encode.CookieName(*sp.SessionName); err != nil {
			return nil, &routeRefusal{field + ".sessionName", fmt.Sprintf("cookie name %s: 1-64 letters, digits, '_' or '-'", translate.Quote(*sp.SessionName))}
		}
		a.Name = *sp.SessionName
	}
	if sp.IdleTimeout != nil {
		secs, refusal := cookieSeconds(field+".idleTimeout", *sp.IdleTimeout)
		if refusal != nil {
			return nil, refusal
		}
		a.MaxIdleSeconds = secs
	}
	permanent := false
	if c := sp.CookieConfig; c != nil && c.LifetimeType != nil {
		switch *c.LifetimeType {
		case gwv1.PermanentCookieLifetimeType:
			permanent = true
		case gwv1.SessionCookieLifetimeType:
		default:
			return nil, &routeRefusal{field + ".cookieConfig.lifetimeType", fmt.Sprintf("%s is not Session or Permanent", translate.Quote(string(*c.LifetimeType)))}
		}
	}
	switch {
	case sp.AbsoluteTimeout != nil:
		secs, refusal := cookieSeconds(field+".absoluteTimeout", *sp.AbsoluteTimeout)
		if refusal != nil {
			return nil, refusal
		}
		if permanent {
			a.MaxAgeSeconds = secs // HAProxy's maxlife too
		} else {
			a.MaxLifeSeconds = secs
		}
	case permanent:
		return nil, &routeRefusal{field + ".absoluteTimeout", "a Permanent cookie needs an absolute timeout"}
	}
	return a, nil
}

// applyTo gives a rule's pool its settings under an ID of its own.
func (s ruleSettings) applyTo(pool *model.Pool) *model.Pool {
	if pool == nil || s.zero() {
		return pool
	}
	b, _ := json.Marshal(s) // plain fields: cannot fail
	p := *pool
	p.ID = model.ID("gateway-rule", pool.ID, string(b))
	p.Name = p.Namespace + "_rule_" + p.ID[:8]
	p.ServerTimeout, p.ConnectTimeout, p.Tries, p.Affinity = s.Server, s.Connect, s.Tries, s.Affinity
	p.RetryStatuses, p.RetryTimeout, p.Deadline = s.RetryStatuses, s.RetryTimeout, s.Deadline
	return &p
}

// cookieSeconds reads a session timeout as whole seconds (rounded up:
// HAProxy's cookie dates are seconds), 1s to ten years.
func cookieSeconds(field string, d gwv1.Duration) (int, *routeRefusal) {
	t, err := parseGEPDuration(d)
	if err != nil {
		return 0, &routeRefusal{field, err.Error()}
	}
	secs := int((t + time.Second - 1) / time.Second)
	if secs < 1 || secs > translate.MaxCookieAge {
		return 0, &routeRefusal{field, fmt.Sprintf("%s is outside 1s-%ds", d, translate.MaxCookieAge)}
	}
	return secs, nil
}
