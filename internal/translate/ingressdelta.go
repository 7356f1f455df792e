package translate

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// A new, changed or deleted Ingress is the change users wait on, and with
// thousands present translating every Ingress again costs tens of
// milliseconds (about 37 µs each) plus a reconcile of every load balancer
// it hands back as new. Translation of one Ingress reads nothing but the
// Ingress, the objects it names and the classes; assembling reads only the
// Ingresses of one load balancer (hosts, routes, pools, certificates and
// conflicts are settled inside a group). So when nothing but some
// Ingresses changed, only the load balancers those Ingresses were or now
// are part of can change: IngressChanges translates their Ingresses alone
// and keeps every other load balancer, and every other Ingress's
// problems, as they were.

// IngressChanges returns what the merged translation of snap (Ingresses,
// Services and Gateways, as Merge joins them) would be, given prev, the
// merged translation of prevSnap, when snap differs from prevSnap in
// Ingresses only (the caller checks that every other object, the nodes
// and opts are the same). Load balancers it does not touch are prev's
// own pointers; prev itself is left as it was.
//
// ok is false when the result could differ from a full translation in
// more than the load balancers of the changed Ingresses, and the caller
// must translate everything: an Ingress of ours is a canary (canaries
// attach across Ingresses by host and path), or the Ingresses of ours
// reach --max-ingresses or those of a namespace its quota (which refuse
// the newest past them), or a namespace may reach a cap of
// regular-expression paths (regexcap.go).
func IngressChanges(prev *Result, prevSnap, snap *source.Snapshot, opts Options) (res *Result, ok bool) {
	if prev == nil || prevSnap == nil {
		return nil, false
	}
	classes := ourClasses(snap.IngressClasses, opts)
	changed, ok := changedIngresses(prevSnap, snap, classes, opts)
	if !ok {
		return nil, false
	}
	affected := affectedLoadBalancers(prev, changed, classes, opts)
	for _, lb := range prev.LoadBalancers {
		if affected[lb.UUID] && !servesIngressesOnly(lb) {
			return nil, false // not an Ingress's: never expected, not patched
		}
	}
	// Every Ingress whose load balancer is affected is translated again,
	// with the changed ones: the groups are whole.
	again := maps.Clone(changed)
	for ref, uuid := range prev.Accepted {
		if ref.Kind == model.KindIngress && affected[uuid] {
			again[ref] = nil
		}
	}
	part := *snap
	part.Ingresses = nil
	for _, ing := range snap.Ingresses {
		if _, ok := again[model.IngressRef(ing.Namespace, ing.Name)]; ok {
			part.Ingresses = append(part.Ingresses, ing)
		}
	}
	part.Services, part.EndpointSlices = servicesOfNamespaces(part.Ingresses, opts.AuthURLNamespaces, snap)
	sub := Ingresses(&part, opts)
	return mergeIngressChanges(prev, sub, again, affected), true
}

// servicesOfNamespaces are the Services of snap that ings can name, and their
// EndpointSlices: those of the Ingresses' own namespaces. Every Service
// an Ingress's translation looks up is of its namespace (its backends,
// the default-backend and auth-url annotations: poolFor, resolveFallback,
// resolveExtAuth), or of a namespace --auth-url-namespaces lists (more),
// so this is exact whatever annotation names one.
// Indexing every Service of a cluster again for one new Ingress cost more
// than translating it.
func servicesOfNamespaces(ings []*networkingv1.Ingress, more []string, snap *source.Snapshot) ([]*corev1.Service, []*discoveryv1.EndpointSlice) {
	namespaces := map[string]bool{}
	for _, ns := range more { // --auth-url-namespaces: any Ingress's auth-url may name their Services
		namespaces[ns] = true
	}
	for _, ing := range ings {
		namespaces[ing.Namespace] = true
	}
	var svcs []*corev1.Service
	for _, s := range snap.Services {
		if namespaces[s.Namespace] {
			svcs = append(svcs, s)
		}
	}
	var eps []*discoveryv1.EndpointSlice
	for _, es := range snap.EndpointSlices {
		if namespaces[es.Namespace] {
			eps = append(eps, es)
		}
	}
	return svcs, eps
}

// changedIngresses are the Ingresses of prevSnap and snap that differ:
// added, removed, or with a different object (sameIngressObject), each
// the next version or nil when removed. ok is false when a full translation is needed.
func changedIngresses(prevSnap, snap *source.Snapshot, classes classSet, opts Options) (map[model.ObjectRef]*networkingv1.Ingress, bool) {
	// Every Ingress of ours may be a canary.
	for _, ing := range snap.Ingresses {
		if classes.owns(ing, opts) && mayBeCanary(ing) {
			return nil, false
		}
	}
	// At the cap or a namespace's quota, before or now, which Ingress is
	// refused depends on the others: a deletion lets a refused one in.
	if atCapOrQuota(prevSnap.Ingresses, classes, opts) || atCapOrQuota(snap.Ingresses, classes, opts) {
		return nil, false
	}
	if regexCapMayBite(snap.Ingresses, classes, opts) {
		return nil, false
	}
	// What changed is between what both lists share at their ends.
	prevRest, rest := source.Differing(prevSnap.Ingresses, snap.Ingresses)
	before := make(map[model.ObjectRef]*networkingv1.Ingress, len(prevRest))
	for _, ing := range prevRest {
		before[model.IngressRef(ing.Namespace, ing.Name)] = ing
	}
	changed := map[model.ObjectRef]*networkingv1.Ingress{}
	now := make(map[model.ObjectRef]bool, len(rest))
	for _, ing := range rest {
		ref := model.IngressRef(ing.Namespace, ing.Name)
		now[ref] = true
		if !sameIngressObject(before[ref], ing) {
			changed[ref] = ing
		}
	}
	for ref, ing := range before {
		if !now[ref] {
			if mayBeCanary(ing) {
				return nil, false
			}
			changed[ref] = nil
		}
	}
	// A changed Ingress that was a canary left its mark on another
	// Ingress's load balancer.
	for ref := range changed {
		if old := before[ref]; old != nil && mayBeCanary(old) {
			return nil, false
		}
	}
	return changed, true
}

// atCapOrQuota: the Ingresses of ours in ings reach --max-ingresses, or
// those of one namespace its quota (--max-ingresses-per-namespace).
func atCapOrQuota(ings []*networkingv1.Ingress, classes classSet, opts Options) bool {
	ours := 0
	quota := newNamespaceQuota(opts.MaxIngressesPerNamespace)
	for _, ing := range ings {
		if !classes.owns(ing, opts) {
			continue
		}
		if quota.take(ing.Namespace); quota.full(ing.Namespace) {
			return true
		}
		ours++
	}
	return opts.MaxIngresses > 0 && ours >= opts.MaxIngresses
}

// sameIngressObject: b is what translation read as a. Unchanged objects
// are usually the very same pointer (the informer's cache, the files
// source's decode of an unchanged file) or carry the same resourceVersion;
// otherwise everything but the status and the bookkeeping is compared (a
// status write, pier's own coming back, changes nothing translation reads;
// one edited Ingress in a file of many re-decodes them all).
func sameIngressObject(a, b *networkingv1.Ingress) bool {
	if a == nil || b == nil {
		return false
	}
	if a == b || (a.ResourceVersion != "" && a.ResourceVersion == b.ResourceVersion) {
		return true
	}
	ma, mb := a.ObjectMeta, b.ObjectMeta
	ma.ResourceVersion, mb.ResourceVersion = "", ""
	ma.ManagedFields, mb.ManagedFields = nil, nil
	return reflect.DeepEqual(ma, mb) && reflect.DeepEqual(a.Spec, b.Spec)
}

// mayBeCanary errs on the side of a full translation: any annotation
// whose key mentions canary, whatever its prefix or value.
func mayBeCanary(ing *networkingv1.Ingress) bool {
	for k := range ing.Annotations {
		if strings.Contains(k, "canary") {
			return true
		}
	}
	return false
}

// affectedLoadBalancers are the UUIDs of the load balancers the changed
// Ingresses were part of in prev, or would be part of now.
func affectedLoadBalancers(prev *Result, changed map[model.ObjectRef]*networkingv1.Ingress, classes classSet, opts Options) map[string]bool {
	affected := map[string]bool{}
	for ref, ing := range changed {
		if uuid, ok := prev.Accepted[ref]; ok {
			affected[uuid] = true
		}
		if ing == nil || !classes.owns(ing, opts) {
			continue
		}
		if uuid, ok := identityOf(ing, opts); ok {
			affected[uuid] = true
		}
	}
	return affected
}

// identityOf is the UUID of the load balancer ing would be part of, as
// assemble derives it; ok is false when its annotations refuse it.
func identityOf(ing *networkingv1.Ingress, opts Options) (string, bool) {
	settings, issues := annotation.Parse(ing.Annotations)
	for _, is := range applyPolicies(issues, ing.Annotations, opts) {
		if is.Fatal {
			return "", false
		}
	}
	p := &parsedIngress{ing: ing, settings: ingressSettings{Settings: settings},
		source: model.Source{Kind: model.KindIngress, Namespace: ing.Namespace, Name: ing.Name, UID: validUID(string(ing.UID))}}
	uuid, _ := lbIdentity(p, opts)
	return uuid, true
}

// mergeIngressChanges is prev with the load balancers in affected, and
// everything of the Ingresses in again, taken from sub (the translation
// of those Ingresses alone).
func mergeIngressChanges(prev, sub *Result, again map[model.ObjectRef]*networkingv1.Ingress, affected map[string]bool) *Result {
	res := &Result{Accepted: maps.Clone(prev.Accepted), Ours: maps.Clone(prev.Ours), Gateway: prev.Gateway,
		AddressRefused: prev.AddressRefused}
	for _, lb := range prev.LoadBalancers {
		if affected[lb.UUID] {
			continue
		}
		res.LoadBalancers = append(res.LoadBalancers, lb)
	}
	// prev's are in UUID order: the few of sub are put in place rather
	// than sorting thousands again.
	byUUID := func(a, b *model.LoadBalancer) int { return strings.Compare(a.UUID, b.UUID) }
	if !slices.IsSortedFunc(res.LoadBalancers, byUUID) {
		slices.SortFunc(res.LoadBalancers, byUUID)
	}
	for _, lb := range sub.LoadBalancers {
		i, _ := slices.BinarySearchFunc(res.LoadBalancers, lb, byUUID)
		res.LoadBalancers = slices.Insert(res.LoadBalancers, i, lb)
	}
	for _, pr := range prev.Problems {
		if _, ok := again[model.IngressRef(pr.Namespace, pr.Name)]; ok && pr.Kind == model.KindIngress {
			continue
		}
		res.Problems = append(res.Problems, pr)
	}
	res.Problems = append(res.Problems, sub.Problems...)
	sortProblems(res.Problems)
	for ref := range again {
		delete(res.Accepted, ref)
		delete(res.Ours, ref)
	}
	maps.Copy(res.Accepted, sub.Accepted)
	maps.Copy(res.Ours, sub.Ours)
	return res
}
