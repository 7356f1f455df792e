package translate

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"pier.dev/pier/internal/annotation"
)

// nginxAlternatives names, for ingress-nginx annotations pier does not
// implement, what pier does instead (snippets: snippets.go).
var nginxAlternatives = map[string]string{
	"server-alias":           "one more host in spec.rules",
	"proxy-set-headers":      "pier.dev/request-headers (typed \"Name: value\" lines on the Ingress itself)",
	"proxy-next-upstream":    "proxy-next-upstream-tries; pier retries on connection failures and empty responses only (HAProxy's retry-on), not on timeouts or 5xx",
	"limit-burst-multiplier": "a higher limit-rps or limit-rpm (pier counts accepted requests over a sliding second or minute, with no burst on top)",
	"proxy-ssl-verify-depth": "a ca.crt holding only the CAs to trust: HAProxy 2.6 has no verify depth for servers, so proxy-ssl-verify on accepts any chain length to ca.crt",
}

// plannedNginx are ingress-nginx annotations pier plans to support but
// does not implement yet, so reported as such rather than as unknown. None
// is left; the list stays for the next family that is started.
var plannedNginx = setOf()

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// unsupportedNginx is the warning for an ingress-nginx annotation pier
// does not implement and that is not a snippet.
func unsupportedNginx(key string) string {
	name := strings.TrimPrefix(key, NginxPrefix)
	if alt, ok := nginxAlternatives[name]; ok {
		return "unsupported ingress-nginx annotation, ignored: use " + alt
	}
	if plannedNginx[name] {
		return "not yet supported by pier (planned), ignored"
	}
	return "unsupported ingress-nginx annotation, ignored (see docs/migration.md)"
}

// NginxAnnotations are the names (without prefix) of the ingress-nginx
// annotations pier implements, sorted.
func NginxAnnotations() []string { return sortedKeys(compatAnnotations) }

// AnnotationReport is how pier treats one annotation of an Ingress.
type AnnotationReport struct {
	Key    string `json:"key"`
	Status Status `json:"status"`
	Note   string `json:"note,omitempty"`
}

// ReportAnnotations classifies every pier.dev/ and ingress-nginx
// annotation of ann, sorted by key, for pier lint. Values are checked
// too: an invalid value is reported unsupported with the parser's
// reason, as translation would refuse the Ingress; a snippet is
// reported unsupported, and refusing it unless opts.IgnoreSnippets (a
// missing protection likewise, unless opts.IgnoreProtections).
func ReportAnnotations(ann map[string]string, opts Options) []AnnotationReport {
	_, issues := parseAnnotations(ann)
	issues = applyPolicies(issues, ann, opts)
	problem := map[string]annotationIssue{}
	for _, is := range issues {
		if _, dup := problem[is.key]; !dup || is.fatal {
			problem[is.key] = is
		}
	}
	var out []AnnotationReport
	for k := range ann {
		if !strings.HasPrefix(k, NginxPrefix) && !strings.HasPrefix(k, AnnotationPrefix) {
			continue
		}
		r := AnnotationReport{Key: k, Status: Supported}
		if name, ok := compatName(k); ok {
			if d := compatAnnotations[name].difference; d != "" {
				r.Status, r.Note = SupportedWithDifference, d
			}
		}
		if is, bad := problem[k]; bad && (is.fatal || !isPrecedenceNote(is)) {
			r.Status, r.Note = Unsupported, is.message
			if is.fatal {
				r.Note = "invalid value, the Ingress is refused: " + is.message
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// isPrecedenceNote: the temporal-over-permanent and value-over-pattern
// notes are not failures.
func isPrecedenceNote(is annotationIssue) bool {
	return strings.HasPrefix(is.message, "temporal-redirect is also set") ||
		strings.HasPrefix(is.message, "canary-by-header-value is also set and wins")
}

// ReportIngress is ReportAnnotations plus what needs the Ingress's paths:
// with use-regex, or a rewrite-target naming capture groups, a path
// outside the regular-expression subset, or with fewer groups than the
// target names, refuses the Ingress. The annotation that made the paths
// regular expressions (use-regex, else rewrite-target) is then reported
// unsupported with the first such path's reason.
func ReportIngress(ing *networkingv1.Ingress, opts Options) []AnnotationReport {
	out := ReportAnnotations(ing.Annotations, opts)
	s, _ := parseAnnotations(ing.Annotations)
	p := &parsedIngress{ing: ing, settings: s}
	p.checkStripForm()
	if !p.regexPaths() {
		return out
	}
	key := annotation.KeyOf(ing.Annotations, "use-regex")
	if !s.useRegex {
		key = annotation.KeyOf(ing.Annotations, "rewrite-target")
	}
	for i, rule := range ing.Spec.Rules {
		if rule.HTTP == nil {
			continue
		}
		for j, hp := range rule.HTTP.Paths {
			if _, _, err := p.routePath(hp); err != nil {
				for k := range out {
					if out[k].Key == key && out[k].Status != Unsupported {
						out[k].Status = Unsupported
						out[k].Note = fmt.Sprintf("the Ingress is refused: spec.rules[%d].http.paths[%d]: %v", i, j, err)
					}
				}
				return out
			}
		}
	}
	return out
}
