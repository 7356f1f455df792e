package annotation

import (
	"fmt"

	"pier.dev/pier/internal/encode"
)

// Canary are canary and its companions.
type Canary struct {
	Enabled                     bool
	Weight, Total               int
	Header, HeaderValue, Cookie string
	HeaderPattern               string // as written: encode.ParseValueRegex's subset
}

func parseCanaryWeight(name, v string, min int) (int, error) {
	n, err := encode.Int(v, min, maxCanaryTotal)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return n, nil
}

func parseCanaryHeader(v string) (string, error) {
	h, err := encode.HeaderName(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-header: %w", err)
	}
	return h.String(), nil
}

func parseCanaryHeaderValue(v string) (string, error) {
	h, err := encode.PlainValue(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-header-value: %w", err)
	}
	return h.String(), nil
}

func parseCanaryHeaderPattern(v string) (string, error) {
	if _, err := encode.ParseValueRegex(v); err != nil {
		return "", fmt.Errorf("canary-by-header-pattern: %w", err)
	}
	return v, nil
}

func parseCanaryCookie(v string) (string, error) {
	c, err := encode.CookieName(v)
	if err != nil {
		return "", fmt.Errorf("canary-by-cookie: %w", err)
	}
	return c.String(), nil
}

// canaryIssues checks the companions once all are read: the weight is
// within the total, a header value needs its header, and without canary
// "true" they do nothing (as in ingress-nginx).
func canaryIssues(c Canary, ann map[string]string) []Issue {
	var out []Issue
	if c.Weight > c.Total {
		out = append(out, Issue{Key: KeyOf(ann, "canary-weight"), Fatal: true,
			Message: fmt.Sprintf("canary-weight %d is over canary-weight-total %d", c.Weight, c.Total)})
	}
	if c.HeaderValue != "" && c.Header == "" {
		out = append(out, Issue{Key: KeyOf(ann, "canary-by-header-value"),
			Message: "canary-by-header-value without canary-by-header (the header it is compared with) does nothing, as in ingress-nginx"})
	}
	switch {
	case c.HeaderPattern != "" && c.Header == "":
		out = append(out, Issue{Key: KeyOf(ann, "canary-by-header-pattern"),
			Message: "canary-by-header-pattern without canary-by-header (the header it is matched against) does nothing, as in ingress-nginx"})
	case c.HeaderPattern != "" && c.HeaderValue != "":
		out = append(out, Issue{Key: KeyOf(ann, "canary-by-header-pattern"),
			Message: "canary-by-header-value is also set and wins: the pattern is ignored, as in ingress-nginx"})
	}
	if !c.Enabled {
		for _, name := range []string{"canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value",
			"canary-by-header-pattern", "canary-by-cookie"} {
			if _, set := ann[KeyOf(ann, name)]; set {
				out = append(out, Issue{Key: KeyOf(ann, name), Message: name + " without canary \"true\" does nothing, as in ingress-nginx"})
			}
		}
	}
	return out
}

// ingress-nginx's canary-weight-total default, and pier's bound on it.
const (
	defaultCanaryTotal = 100
	maxCanaryTotal     = 1000000
)
