package translate

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
)

// The prefix-strip idiom of ingress-nginx, the one form of capture groups
// pier serves: paths "P(/|$)(.*)" with rewrite-target "T$2" send
// /P/rest to the backend as T + rest (and /P as T). As a regular
// expression, ^P(/|$)(.*) matches exactly the paths pathType Prefix P
// matches (P itself, or P then "/"); pier routes it as that Prefix path
// and rewrites with replace-path ^P(/|$)(.*) T\2.
const (
	stripSuffix = "(/|$)(.*)"
	tailGroup   = "$2"
)

// parseRewriteTarget accepts what ingress-nginx's rewrite-target becomes
// without capture groups: the path every request of the route is sent
// to the backend with (ingress-nginx: rewrite "(?i)<path>" <target>
// break, which replaces the whole path and keeps the query string), an
// absolute path of letters, digits and ._~/- only; or that path ending
// with "/" followed by "$2", the prefix-strip idiom (tail true), whose
// paths parseStripPath checks.
func parseRewriteTarget(v string) (target string, tail bool, err error) {
	if t, ok := strings.CutSuffix(v, tailGroup); ok && !strings.Contains(t, "$") {
		if !strings.HasSuffix(t, "/") {
			return "", false, fmt.Errorf("rewrite-target %s: capture groups: only the prefix-strip form "+
				"<path ending with />$2 is supported (with paths <prefix>(/|$)(.*))", quoteForMessage(v))
		}
		t, err := plainPath("rewrite-target", t)
		return t, err == nil, err
	}
	if strings.Contains(v, "$") {
		return "", false, fmt.Errorf("rewrite-target %s: capture groups: only the prefix-strip form "+
			"<path ending with />$2 is supported (with paths <prefix>(/|$)(.*)); write the target path without them, or in that form",
			quoteForMessage(v))
	}
	t, err := plainPath("rewrite-target", v)
	return t, false, err
}

// parseStripPath reads a path of an Ingress whose rewrite-target is
// "T$2": it must be "P(/|$)(.*)" with P a plain path, not "/" and not
// ending with "/". It returns P, which is routed as pathType Prefix
// whatever the Ingress says (ingress-nginx reads the path as a regular
// expression whatever its pathType).
func parseStripPath(path string) (string, error) {
	p, ok := strings.CutSuffix(path, stripSuffix)
	if !ok || p == "" || p == "/" || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("path %s: with rewrite-target <path>$2 each path must be <prefix>%s "+
			"(ingress-nginx's prefix-strip form; the only capture groups pier supports), the prefix a path "+
			"of letters, digits and ._~/- not ending with /", quoteForMessage(path), stripSuffix)
	}
	return plainPath("path prefix", p)
}

// routePath is a rule path as pier routes it: as its pathType says, or,
// with rewrite-target "T$2", the prefix of "P(/|$)(.*)" as Prefix.
func (p *parsedIngress) routePath(hp networkingv1.HTTPIngressPath) (string, model.CompareType, error) {
	if !p.settings.rewriteTail {
		return checkPath(hp.Path, hp.PathType)
	}
	prefix, err := parseStripPath(hp.Path)
	if err != nil {
		return "", "", err
	}
	prefixType := networkingv1.PathTypePrefix
	return checkPath(prefix, &prefixType)
}

// stripPrefixOf is the route's StripPrefix: its path, when the Ingress
// uses the prefix-strip form (a from-to-www route has no rewrite).
func stripPrefixOf(s *ingressSettings, r route) string {
	if !s.rewriteTail || r.wwwTo != "" {
		return ""
	}
	return r.path
}
