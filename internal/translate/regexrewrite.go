package translate

import (
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// parseStripPath reads a path of an Ingress whose rewrite-target is
// "T$2": it must be "P(/|$)(.*)" with P a plain path, not "/" and not
// ending with "/". It returns P, which is routed as pathType Prefix
// whatever the Ingress says (ingress-nginx reads the path as a regular
// expression whatever its pathType).
func parseStripPath(path string) (string, error) {
	p, ok := strings.CutSuffix(path, annotation.StripSuffix)
	if !ok || p == "" || p == "/" || strings.HasSuffix(p, "/") {
		return "", fmt.Errorf("path %s: with rewrite-target <path>$2 each path must be <prefix>%s "+
			"(ingress-nginx's prefix-strip form; the only capture groups pier supports), the prefix a path "+
			"of letters, digits and ._~/- not ending with /", annotation.QuoteForMessage(path), annotation.StripSuffix)
	}
	return annotation.PlainPath("path prefix", p)
}

// regexPaths: the Ingress's paths are regular expressions, as
// ingress-nginx reads them with use-regex or a rewrite-target holding
// capture groups (its location becomes ~* "^<path>", whatever the
// pathType), unless every path has the prefix-strip form, which is
// routed as Prefix (stripForm).
func (p *parsedIngress) regexPaths() bool {
	return (p.settings.UseRegex || p.settings.RewriteGroups > 0) && !p.stripForm
}

// checkStripForm sets stripForm when rewrite-target is "<path>/$2" and
// every path of the Ingress is "P(/|$)(.*)": then ^P(/|$)(.*) matches
// exactly the paths pathType Prefix P does, and the route is served as
// that Prefix (see the top of this file).
func (p *parsedIngress) checkStripForm() {
	if !p.settings.RewriteTail {
		return
	}
	for _, rule := range p.ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for _, hp := range rule.HTTP.Paths {
			if _, err := parseStripPath(hp.Path); err != nil {
				return
			}
		}
	}
	p.stripForm = true
}

// routePath is a rule path as pier routes it: as its pathType says; with
// the prefix-strip form, the prefix of "P(/|$)(.*)" as Prefix; with
// regular-expression paths, the path as a PATH REGEX (whatever its
// pathType, as ingress-nginx), with at least the groups rewrite-target
// names.
func (p *parsedIngress) routePath(hp networkingv1.HTTPIngressPath) (string, model.CompareType, error) {
	switch {
	case p.stripForm:
		prefix, err := parseStripPath(hp.Path)
		if err != nil {
			return "", "", err
		}
		prefixType := networkingv1.PathTypePrefix
		return checkPath(prefix, &prefixType)
	case p.regexPaths():
		if hp.PathType == nil {
			return "", "", fmt.Errorf("pathType is required")
		}
		re, err := encode.ParsePathRegex(hp.Path)
		if err != nil {
			return "", "", fmt.Errorf("path %s: as a regular expression (use-regex): %w", annotation.QuoteForMessage(hp.Path), err)
		}
		if n := p.settings.RewriteGroups; re.Groups() < n {
			return "", "", fmt.Errorf("path %s has %d capture groups, rewrite-target %s uses $%d",
				annotation.QuoteForMessage(hp.Path), re.Groups(), annotation.QuoteForMessage(p.settings.RewriteTarget), n)
		}
		return hp.Path, model.CompareRegex, nil
	}
	return checkPath(hp.Path, hp.PathType)
}

// stripPrefixOf is the route's StripPrefix: its path, when the Ingress
// uses the prefix-strip form (a from-to-www route has no rewrite).
func stripPrefixOf(p *parsedIngress, r route) string {
	if !p.stripForm || r.wwwTo != "" {
		return ""
	}
	return r.path
}

// rewriteRegexOf is the route's RewriteRegex: its regular expression,
// when rewrite-target names capture groups and the route is not served
// in the prefix-strip form.
func rewriteRegexOf(p *parsedIngress, r route) string {
	if p.settings.RewriteGroups == 0 || r.pathMatch != model.CompareRegex || r.wwwTo != "" {
		return ""
	}
	return r.path
}

// rewritePathOf is the RewritePath of the Ingress's routes: the target,
// without its "$2" in the prefix-strip form (StripPrefix adds the rest).
func rewritePathOf(p *parsedIngress) string {
	if p.stripForm {
		return strings.TrimSuffix(p.settings.RewriteTarget, annotation.TailGroup)
	}
	return p.settings.RewriteTarget
}
