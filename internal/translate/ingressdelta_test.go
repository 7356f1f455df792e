package translate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
)

// TestIngressChangesEqualsFullTranslate applies random sequences of
// Ingress changes (add, edit, remove; join and leave groups, shared across
// namespaces or not; host and route conflicts; missing Services and
// Secrets; refused annotations; another class) and checks after each that
// the incremental result equals a full translation of the new snapshot,
// problems of untouched Ingresses included, and that every load balancer
// no changed Ingress was or is part of is the previous result's own.
func TestIngressChangesEqualsFullTranslate(t *testing.T) {
	opts := DefaultOptions()
	opts.SharedGroups = map[string][]string{"shared": {"*"}}
	for seed := range uint64(40) {
		if seed%2 == 1 {
			opts.DefaultCertificate = "shop/tls" // every load balancer has HTTPS
		} else {
			opts.DefaultCertificate = ""
		}
		rng := rand.New(rand.NewPCG(seed, 9))
		snap := endpointFixture(t)
		snap.Secrets = append(snap.Secrets, tlsSecretFor(t, "shop", "tls", "h0.example", "h1.example"))
		snap.IngressClasses = append(snap.IngressClasses, &networkingv1.IngressClass{
			ObjectMeta: metav1.ObjectMeta{Name: "other"}, Spec: networkingv1.IngressClassSpec{Controller: "example.com/other"}})
		prev := fullTranslate(snap, opts)
		incremental := 0
		for step := range 60 {
			next, what := randomIngressChange(rng, snap, step)
			got, ok := IngressChanges(prev, snap, next, opts)
			want := fullTranslate(next, opts)
			if ok {
				incremental++
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("seed %d step %d (%s): incremental result differs from a full translation:\n got %s\nwant %s",
						seed, step, what, describeResult(got), describeResult(want))
				}
				checkUntouchedKept(t, prev, got, snap, next, opts)
				if strings.HasPrefix(what, "status of") && !slices.Equal(got.LoadBalancers, prev.LoadBalancers) {
					t.Fatalf("seed %d step %d (%s): load balancers translated again", seed, step, what)
				}
			}
			snap, prev = next, want
		}
		if incremental < 40 {
			t.Errorf("seed %d: only %d of 60 changes were incremental", seed, incremental)
		}
	}
}

// randomIngressChange adds, edits or removes one Ingress of snap.
func randomIngressChange(rng *rand.Rand, snap *source.Snapshot, step int) (*source.Snapshot, string) {
	next := *snap
	next.Ingresses = append([]*networkingv1.Ingress(nil), snap.Ingresses...)
	switch op := rng.IntN(11); {
	case op == 10 && len(next.Ingresses) > 0:
		// The same Ingress decoded again, or with a new status: nothing
		// translation reads changed, so nothing is translated again.
		i := rng.IntN(len(next.Ingresses))
		ing := next.Ingresses[i].DeepCopy()
		ing.ResourceVersion = fmt.Sprint(5000 + step)
		ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
		next.Ingresses[i] = ing
		return &next, "status of " + ing.Name
	case op < 4 || len(next.Ingresses) == 0:
		ing := randomIngress(rng, fmt.Sprintf("n%d", step), step)
		next.Ingresses = append(next.Ingresses, ing)
		return &next, "add " + ing.Name
	case op < 8:
		i := rng.IntN(len(next.Ingresses))
		old := next.Ingresses[i]
		ing := randomIngress(rng, old.Name, step)
		ing.Namespace, ing.CreationTimestamp, ing.UID = old.Namespace, old.CreationTimestamp, old.UID
		next.Ingresses[i] = ing
		return &next, "edit " + ing.Name
	default:
		i := rng.IntN(len(next.Ingresses))
		name := next.Ingresses[i].Name
		next.Ingresses = append(next.Ingresses[:i], next.Ingresses[i+1:]...)
		return &next, "remove " + name
	}
}

// randomIngress draws from few hosts, Services and groups, so that
// conflicts and shared load balancers are frequent.
func randomIngress(rng *rand.Rand, name string, step int) *networkingv1.Ingress {
	pick := func(choices ...string) string { return choices[rng.IntN(len(choices))] }
	ns := pick("shop", "shop", "other")
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: fmt.Sprint(1000 + step),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(10+step) * time.Minute)), Annotations: map[string]string{}},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{
			Host: pick("h0.example", "h1.example", "h2.example", name+".example"),
			IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
				Path: pick("/", "/a"), PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
					Name: pick("web", "api", "errors", "missing"), Port: networkingv1.ServiceBackendPort{Number: 80}}},
			}}}},
		}}},
	}
	if g := pick("", "", "shared", "team"); g != "" {
		ing.Annotations[annotation.LoadBalancer] = g
	}
	if rng.IntN(4) == 0 {
		ing.Spec.TLS = []networkingv1.IngressTLS{{Hosts: []string{ing.Spec.Rules[0].Host}, SecretName: pick("tls", "absent")}}
	}
	if rng.IntN(5) == 0 {
		ing.Spec.DefaultBackend = &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
			Name: "errors", Port: networkingv1.ServiceBackendPort{Number: 80}}}
	}
	switch rng.IntN(12) {
	case 0:
		ing.Annotations[annotation.NginxPrefix+"load-balance"] = "no-such-algorithm"
	case 1:
		ing.Spec.IngressClassName = ptrTo("other")
	case 2:
		ing.Annotations[annotation.LoadBalancer] = "Not A Group"
	case 3:
		// Names a Service outside the rules (servicesOfNamespaces).
		ing.Annotations[annotation.NginxPrefix+"default-backend"] = pick("errors", "web", "missing")
	case 4:
		// So does auth-url, by host name.
		ing.Annotations[annotation.NginxPrefix+"auth-url"] = "http://" + pick("errors", "web", "missing") + "." + ns + ".svc/auth"
	}
	return ing
}

// checkUntouchedKept: a load balancer none of whose Ingresses changed,
// before or after, is the previous result's pointer.
func checkUntouchedKept(t *testing.T, prev, got *Result, prevSnap, snap *source.Snapshot, opts Options) {
	t.Helper()
	classes := ourClasses(snap.IngressClasses, opts)
	changed, _ := changedIngresses(prevSnap, snap, classes, opts)
	before := map[string]*model.LoadBalancer{}
	for _, lb := range prev.LoadBalancers {
		before[lb.UUID] = lb
	}
	// A changed Ingress refused after its group was known (an auth-url
	// of another namespace) is in no load balancer's sources, but the one
	// it names was translated again all the same.
	joins := map[string]bool{}
	for _, ing := range changed {
		if ing != nil {
			if uuid, ok := identityOf(ing, opts); ok {
				joins[uuid] = true
			}
		}
	}
	for _, lb := range got.LoadBalancers {
		old := before[lb.UUID]
		if old == nil || touches(old, changed) || touches(lb, changed) || joins[lb.UUID] {
			continue
		}
		if old != lb {
			t.Fatalf("load balancer %s of unchanged Ingresses was translated again", lb.Name)
		}
	}
}

func touches(lb *model.LoadBalancer, changed map[model.ObjectRef]*networkingv1.Ingress) bool {
	for _, s := range lb.Sources {
		if _, ok := changed[s.Ref()]; ok {
			return true
		}
	}
	return false
}

// TestIngressChangesFallsBack: canaries and the --max-ingresses cap are
// left to a full translation; no change at all gives the previous result.
func TestIngressChangesFallsBack(t *testing.T) {
	opts := DefaultOptions()
	base := endpointFixture(t)
	prev := fullTranslate(base, opts)
	if got, ok := IngressChanges(prev, base, base, opts); !ok || !reflect.DeepEqual(got, prev) {
		t.Error("an unchanged snapshot did not give the previous result")
	}
	canary := base.Ingresses[0].DeepCopy()
	canary.Name, canary.ResourceVersion = "canary", "7"
	canary.Annotations = map[string]string{annotation.NginxPrefix + "canary": "true", annotation.NginxPrefix + "canary-weight": "10"}
	next := *base
	next.Ingresses = append(append([]*networkingv1.Ingress(nil), base.Ingresses...), canary)
	if _, ok := IngressChanges(prev, base, &next, opts); ok {
		t.Error("a canary was patched")
	}
	capped := opts
	capped.MaxIngresses = len(base.Ingresses)
	added := base.Ingresses[0].DeepCopy()
	added.Name, added.ResourceVersion = "added", "8"
	next.Ingresses = append(append([]*networkingv1.Ingress(nil), base.Ingresses...), added)
	if _, ok := IngressChanges(fullTranslate(base, capped), base, &next, capped); ok {
		t.Error("a change at the --max-ingresses cap was patched")
	}
	// At a namespace's quota, before or after: a deletion lets the
	// newest refused one in, which did not change.
	quota := opts
	quota.MaxIngressesPerNamespace = 0
	for _, ing := range next.Ingresses {
		if ing.Namespace == added.Namespace {
			quota.MaxIngressesPerNamespace++
		}
	}
	if _, ok := IngressChanges(fullTranslate(base, quota), base, &next, quota); ok {
		t.Error("a change reaching a namespace's quota was patched")
	}
	quota.MaxIngressesPerNamespace--
	if _, ok := IngressChanges(fullTranslate(&next, quota), &next, base, quota); ok {
		t.Error("a deletion from a namespace past its quota was patched")
	}
	if got, ok := IngressChanges(prev, base, &next, opts); !ok || !reflect.DeepEqual(got, fullTranslate(&next, opts)) {
		t.Errorf("an added Ingress: ok %v", ok)
	}
}
