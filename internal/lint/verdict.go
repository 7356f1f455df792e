package lint

import (
	"fmt"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// verdicts decides each Ingress of snap, in namespace/name order:
//   - not pier's: translation did not count it as of pier's class;
//   - refused: translation or IPAM left it out of Accepted (its first
//     Error problem says why), or the load balancer that serves it fails
//     its render or `haproxy -c`, which leaves it in ERROR with nothing
//     served;
//   - serves with differences: served, with a problem (a Warning, or an
//     Error about a part of it) or an annotation ingress-nginx reads
//     otherwise;
//   - serves: served, and nothing to say.
func verdicts(snap *source.Snapshot, res *translate.Result, problems []model.Problem,
	lbs map[string]*model.LoadBalancer, checks map[string]error, opts translate.Options) []Ingress {
	byRef := map[model.ObjectRef][]model.Problem{}
	for _, p := range problems {
		if p.Kind == model.KindIngress {
			ref := model.IngressRef(p.Namespace, p.Name)
			byRef[ref] = append(byRef[ref], p)
		}
	}
	ings := append([]*networkingv1.Ingress(nil), snap.Ingresses...)
	sort.SliceStable(ings, func(i, j int) bool {
		a, b := ings[i], ings[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Name < b.Name)
	})
	out := make([]Ingress, 0, len(ings))
	for _, ing := range ings {
		ref := model.IngressRef(ing.Namespace, ing.Name)
		v := Ingress{Namespace: ing.Namespace, Name: ing.Name, Problems: byRef[ref],
			Annotations: translate.ReportIngress(ing, opts)}
		if v.Problems == nil {
			v.Problems = []model.Problem{}
		}
		if v.Annotations == nil {
			v.Annotations = []translate.AnnotationReport{}
		}
		uuid, accepted := res.Accepted[ref]
		switch {
		case !res.Ours[ref]:
			v.Verdict, v.Reason = NotOurs, notOursReason(ing, snap, opts)
		case !accepted:
			v.Verdict, v.Reason = Refused, refusalReason(v.Problems)
		case checks[uuid] != nil:
			v.Verdict = Refused
			v.Reason = fmt.Sprintf("its load balancer %s would be in ERROR, serving nothing: %v", lbName(lbs, uuid), checks[uuid])
		default:
			v.LoadBalancer = lbName(lbs, uuid)
			v.Differences = differences(v)
			v.Verdict = Serves
			if len(v.Differences) > 0 {
				v.Verdict = ServesWithDifferences
			}
		}
		out = append(out, v)
	}
	return out
}

func lbName(lbs map[string]*model.LoadBalancer, uuid string) string {
	if lb := lbs[uuid]; lb != nil {
		return lb.Name
	}
	return uuid
}

// refusalReason is the first Error problem, with a count of the others.
func refusalReason(problems []model.Problem) string {
	var first *model.Problem
	errs := 0
	for i, p := range problems {
		if p.Severity == model.SeverityError {
			if first == nil {
				first = &problems[i]
			}
			errs++
		}
	}
	if first == nil {
		return "not served, and no problem says why"
	}
	reason := first.Reason + ": " + first.Message
	if errs > 1 {
		reason += fmt.Sprintf(" (and %d more errors)", errs-1)
	}
	return reason
}

// differences are the problems of a served Ingress and the annotations
// pier reads otherwise than ingress-nginx.
func differences(v Ingress) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range v.Problems {
		// One problem per path is one difference.
		if d := p.Reason + ": " + p.Message; !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, a := range v.Annotations {
		if a.Status == translate.SupportedWithDifference {
			out = append(out, a.Key+": "+a.Note)
		}
	}
	return out
}

// notOursReason says why translation left ing alone.
func notOursReason(ing *networkingv1.Ingress, snap *source.Snapshot, opts translate.Options) string {
	class, named := "", false
	if ing.Spec.IngressClassName != nil {
		class, named = *ing.Spec.IngressClassName, true
	} else if c, ok := ing.Annotations["kubernetes.io/ingress.class"]; ok {
		class, named = c, true
	}
	if !named {
		return "it names no IngressClass and no IngressClass of pier's is the default (--classless-ingresses takes such Ingresses)"
	}
	for _, c := range snap.IngressClasses {
		if c.Name == class {
			return fmt.Sprintf("its IngressClass %q is another controller's (%q); --ingress-class %s lints it as pier's", class, c.Spec.Controller, class)
		}
	}
	return fmt.Sprintf("no IngressClass %q with spec.controller %s is given; --ingress-class %s lints it as pier's", class, opts.ControllerName, class)
}

// withClasses is snap with an IngressClass of pier's controller for each
// of names, replacing any of that name: what the Ingresses would get once
// their class is moved to pier.
func withClasses(snap *source.Snapshot, names []string, controller string) *source.Snapshot {
	if len(names) == 0 {
		return snap
	}
	out := *snap
	out.IngressClasses = nil
	taken := map[string]bool{}
	for _, n := range names {
		taken[n] = true
	}
	for _, c := range snap.IngressClasses {
		if !taken[c.Name] {
			out.IngressClasses = append(out.IngressClasses, c)
		}
	}
	for _, n := range names {
		out.IngressClasses = append(out.IngressClasses, &networkingv1.IngressClass{
			ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: networkingv1.IngressClassSpec{Controller: controller}})
	}
	return &out
}
