package lint

import (
	"fmt"
	"sort"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// anyHost stands for the rules without a host.
const anyHost = "*"

// hostSplits finds the hosts that served Ingresses spread over several
// load balancers. With ingress-nginx every Ingress of the class answers
// on one address, so a host's paths may come from several Ingresses;
// with pier each Ingress gets a load balancer and an address of its own
// unless pier.dev/load-balancer groups them, and a DNS name points at
// one of the addresses: the paths of the others answer 404 there. Each
// Ingress of a split gets the split among its differences.
func hostSplits(snap *source.Snapshot, res *translate.Result, lbs map[string]*model.LoadBalancer, verdicts []Ingress) []HostSplit {
	type use struct {
		lbs  map[string]bool
		ings []*networkingv1.Ingress
	}
	uses := map[string]*use{}
	byKey := map[string]*networkingv1.Ingress{}
	for _, ing := range snap.Ingresses {
		byKey[ing.Namespace+"/"+ing.Name] = ing
	}
	index := map[string]int{}
	for i, v := range verdicts {
		index[v.Namespace+"/"+v.Name] = i
		if v.Verdict != Serves && v.Verdict != ServesWithDifferences {
			continue
		}
		ing := byKey[v.Namespace+"/"+v.Name]
		uuid := res.Accepted[model.IngressRef(v.Namespace, v.Name)]
		for _, h := range hostsOf(ing) {
			u := uses[h]
			if u == nil {
				u = &use{lbs: map[string]bool{}}
				uses[h] = u
			}
			u.lbs[uuid] = true
			u.ings = append(u.ings, ing)
		}
	}
	var out []HostSplit
	for host, u := range uses {
		if len(u.lbs) < 2 {
			continue
		}
		s := HostSplit{Host: host, Advice: groupAdvice(host, u.ings)}
		for uuid := range u.lbs {
			s.LoadBalancers = append(s.LoadBalancers, lbName(lbs, uuid))
		}
		for _, ing := range u.ings {
			s.Ingresses = append(s.Ingresses, ing.Namespace+"/"+ing.Name)
		}
		sort.Strings(s.LoadBalancers)
		sort.Strings(s.Ingresses)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	for _, s := range out {
		for _, key := range s.Ingresses {
			v := &verdicts[index[key]]
			v.Verdict = ServesWithDifferences
			v.Differences = append(v.Differences, fmt.Sprintf("host %s is spread over %d load balancers (%s), each with its own address "+
				"(ingress-nginx: one address for the class): %s", s.Host, len(s.LoadBalancers), strings.Join(s.LoadBalancers, ", "), s.Advice))
		}
	}
	return out
}

// hostsOf lists the hosts of ing's rules once each, anyHost for a rule
// without one (or a default backend).
func hostsOf(ing *networkingv1.Ingress) []string {
	seen := map[string]bool{}
	var out []string
	add := func(h string) {
		if h == "" {
			h = anyHost
		}
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	if ing.Spec.DefaultBackend != nil {
		add("")
	}
	for _, r := range ing.Spec.Rules {
		add(r.Host)
	}
	return out
}

// groupAdvice says how to serve host from one load balancer: the same
// pier.dev/load-balancer group on each Ingress, and, across namespaces,
// --shared-load-balancer (a group is per namespace without it).
func groupAdvice(host string, ings []*networkingv1.Ingress) string {
	group := ""
	namespaces := map[string]bool{}
	for _, ing := range ings {
		namespaces[ing.Namespace] = true
		if g := ing.Annotations[annotation.LoadBalancer]; g != "" && group == "" && len(validation.IsDNS1123Label(g)) == 0 {
			group = g
		}
	}
	if group == "" {
		group = groupFromHost(host)
	}
	advice := fmt.Sprintf("to serve it from one address, annotate each of its Ingresses with %s: %s", annotation.LoadBalancer, group)
	if len(namespaces) > 1 {
		ns := make([]string, 0, len(namespaces))
		for n := range namespaces {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		advice += fmt.Sprintf(" and start pier with --shared-load-balancer %s=%s (a group is per namespace without it)", group, strings.Join(ns, ","))
	}
	return advice + "; or start pier with --default-load-balancer-group NAME to serve every Ingress of the class from one address"
}

// groupFromHost is a group name made of host's first label.
func groupFromHost(host string) string {
	label, _, _ := strings.Cut(strings.TrimPrefix(host, "*."), ".")
	label = strings.Trim(strings.ToLower(label), "-")
	if label == "" || label == anyHost || len(validation.IsDNS1123Label(label)) > 0 {
		return "shared"
	}
	return label
}
