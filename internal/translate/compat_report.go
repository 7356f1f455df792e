package translate

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"pier.dev/pier/internal/annotation"
)

// Status of an annotation name for migration (pier lint, docs/migration.md).
type Status string

const (
	Supported               Status = "supported"
	SupportedWithDifference Status = "supported-with-difference"
	Unsupported             Status = "unsupported"
)

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
	_, issues := annotation.Parse(ann)
	issues = applyPolicies(issues, ann, opts)
	problem := map[string]annotation.Issue{}
	for _, is := range issues {
		if _, dup := problem[is.Key]; !dup || is.Fatal {
			problem[is.Key] = is
		}
	}
	var out []AnnotationReport
	for k := range ann {
		if !strings.HasPrefix(k, annotation.NginxPrefix) && !strings.HasPrefix(k, annotation.Prefix) {
			continue
		}
		r := AnnotationReport{Key: k, Status: Supported}
		if d := annotation.Difference(k); d != "" {
			r.Status, r.Note = SupportedWithDifference, d
		}
		if is, bad := problem[k]; bad && (is.Fatal || !isPrecedenceNote(is)) {
			r.Status, r.Note = Unsupported, is.Message
			if is.Fatal {
				r.Note = "invalid value, the Ingress is refused: " + is.Message
			}
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// isPrecedenceNote: the temporal-over-permanent and value-over-pattern
// notes are not failures.
func isPrecedenceNote(is annotation.Issue) bool {
	return strings.HasPrefix(is.Message, "temporal-redirect is also set") ||
		strings.HasPrefix(is.Message, "canary-by-header-value is also set and wins")
}

// ReportIngress is ReportAnnotations plus what needs the Ingress's paths:
// with use-regex, or a rewrite-target naming capture groups, a path
// outside the regular-expression subset, or with fewer groups than the
// target names, refuses the Ingress. The annotation that made the paths
// regular expressions (use-regex, else rewrite-target) is then reported
// unsupported with the first such path's reason.
func ReportIngress(ing *networkingv1.Ingress, opts Options) []AnnotationReport {
	out := ReportAnnotations(ing.Annotations, opts)
	s, _ := annotation.Parse(ing.Annotations)
	p := &parsedIngress{ing: ing, settings: ingressSettings{Settings: s}}
	p.checkStripForm()
	if !p.regexPaths() {
		return out
	}
	key := annotation.KeyOf(ing.Annotations, "use-regex")
	if !s.UseRegex {
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
