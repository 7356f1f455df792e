package translate

import (
	"fmt"
	"regexp"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// checkHost validates an Ingress rule host and says how to compare it.
// An empty host matches every request.
func checkHost(h string) (model.CompareType, error) {
	switch {
	case h == "":
		return "", nil
	case strings.HasPrefix(h, "*"):
		_, err := encode.WildcardHost(h)
		return model.CompareWildcard, err
	default:
		_, err := encode.Host(h)
		return model.CompareEqualTo, err
	}
}

// checkPath validates a path for its pathType and returns the value and
// comparison the model uses. ImplementationSpecific is treated as Prefix
// (documented in docs/operations.md). A Prefix path loses its trailing
// slash: "/aaa/bbb/" matches "/aaa/bbb" and "/aaa/bbb/ccc", as Ingress v1
// says.
func checkPath(path string, pt *networkingv1.PathType) (string, model.CompareType, error) {
	if pt == nil {
		return "", "", fmt.Errorf("pathType is required")
	}
	switch *pt {
	case networkingv1.PathTypeExact:
		if _, err := encode.Path(path, encode.PathExact); err != nil {
			return "", "", fmt.Errorf("path: %w", err)
		}
		return path, model.CompareEqualTo, nil
	case networkingv1.PathTypePrefix, networkingv1.PathTypeImplementationSpecific:
		if path == "" && *pt == networkingv1.PathTypeImplementationSpecific {
			path = "/"
		}
		if _, err := encode.Path(path, encode.PathPrefix); err != nil {
			return "", "", fmt.Errorf("path: %w", err)
		}
		if trimmed := strings.TrimRight(path, "/"); trimmed != "" {
			path = trimmed
		} else {
			path = "/"
		}
		return path, model.CompareStartsWith, nil
	}
	return "", "", fmt.Errorf("pathType %s is not Exact, Prefix or ImplementationSpecific", annotation.QuoteForMessage(string(*pt)))
}

var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// validUID keeps a UID only if it has the API server's form: UIDs become
// folder names, so a hand-written one in a manifest must not be trusted.
func validUID(uid string) string {
	if uidPattern.MatchString(uid) {
		return uid
	}
	return ""
}
