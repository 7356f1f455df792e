package annotation

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// defaultCookieName is ingress-nginx's session-cookie-name default.
const defaultCookieName = "INGRESSCOOKIE"

// MaxCookieAge bounds session-cookie-max-age and -expires: ten years.
const MaxCookieAge = 10 * 365 * 24 * 3600

// Affinity are affinity and the session-cookie-* annotations.
type Affinity struct {
	Cookie          bool // affinity: cookie
	Name, Path      string
	MaxAge, Expires int
	SameSite        string
	Secure          model.CookieSecure // session-cookie-secure; "": on HTTPS requests
}

// model is the pool's affinity, nil unless affinity is "cookie".
// session-cookie-expires becomes Max-Age too (HAProxy's cookie has no
// per-response date); when both are set, max-age wins.
func (a Affinity) Model() *model.CookieAffinity {
	if !a.Cookie {
		return nil
	}
	c := &model.CookieAffinity{Name: a.Name, Path: a.Path, MaxAgeSeconds: a.MaxAge, SameSite: a.SameSite, Secure: a.Secure}
	if c.Name == "" {
		c.Name = defaultCookieName
	}
	if c.MaxAgeSeconds == 0 {
		c.MaxAgeSeconds = a.Expires
	}
	if c.Path == "/" {
		c.Path = "" // HAProxy's own path=/
	}
	return c
}

// parseAffinity accepts "cookie", ingress-nginx's only affinity type.
func parseAffinity(v string) (bool, error) {
	if _, err := encode.Enum(v, "cookie"); err != nil {
		return false, fmt.Errorf("affinity: %w", err)
	}
	return true, nil
}

// parseAffinityMode accepts ingress-nginx's two modes. Both render the
// same: the cookie names a slot, and a member keeps its slot.
func parseAffinityMode(v string) error {
	if _, err := encode.Enum(v, "balanced", "persistent"); err != nil {
		return fmt.Errorf("affinity-mode: %w", err)
	}
	return nil
}

// parseCookieName accepts 1-64 letters, digits, '_' and '-'.
func parseCookieName(v string) (string, error) {
	name, err := encode.CookieName(v)
	if err != nil {
		return "", fmt.Errorf("session-cookie-name: %w", err)
	}
	return name.String(), nil
}

// parseCookiePath accepts a path of letters, digits and ._~/- (as
// app-root), "/" included.
func parseCookiePath(v string) (string, error) {
	if _, err := encode.CookiePathAttr(v); err != nil {
		return "", fmt.Errorf("session-cookie-path: %w", err)
	}
	return v, nil
}

// parseCookieAge reads session-cookie-max-age and -expires: whole
// seconds, 1 to ten years.
func parseCookieAge(v string) (int, error) {
	n, err := encode.Int(v, 1, MaxCookieAge)
	if err != nil {
		return 0, fmt.Errorf("cookie age in seconds: %w", err)
	}
	return n, nil
}

// parseSameSite accepts the SameSite values, as ingress-nginx spells them.
func parseSameSite(v string) (string, error) {
	val, err := encode.Enum(v, "None", "Lax", "Strict")
	if err != nil {
		return "", fmt.Errorf("session-cookie-samesite: %w", err)
	}
	return val.String(), nil
}

// parseCookieSecure reads session-cookie-secure: true makes the cookie
// Secure on every response, false on none; unset, it is Secure on
// responses to HTTPS requests, as in ingress-nginx.
func parseCookieSecure(v string) (model.CookieSecure, error) {
	b, err := parseNginxBool(v)
	if err != nil {
		return "", fmt.Errorf("session-cookie-secure: %w", err)
	}
	if b {
		return model.CookieSecureAlways, nil
	}
	return model.CookieSecureNever, nil
}
