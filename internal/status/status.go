// Package status decides what each Ingress of our class publishes in
// status.loadBalancer (Contour's design, seed 004). Deciding is pure; the
// writers (in memory for pier run, the API server for the controller)
// only store what Decide returns, and skip no-op writes.
package status

import (
	"iter"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/translate"
)

// Addresses is how published addresses are discovered.
type Addresses struct {
	// Static, when not empty, is published for every Ingress instead of
	// its VIP and FIP (--status-address). Entries that parse as IPs go in
	// "ip", others in "hostname".
	Static []string
	// Service, "namespace/name", publishes the addresses in that Service's
	// own status.loadBalancer instead (--status-service; Contour's dynamic
	// discovery). While it has none, Ingresses keep what they publish.
	Service string
}

// FromService resolves cfg.Service against the snapshot's Services into
// Static. Without the Service, or while it has no address, Static is empty.
func (cfg Addresses) FromService(services []*corev1.Service) Addresses {
	if cfg.Service == "" {
		return cfg
	}
	cfg.Static = nil
	for _, svc := range services {
		if svc.Namespace+"/"+svc.Name != cfg.Service {
			continue
		}
		for _, in := range svc.Status.LoadBalancer.Ingress {
			if in.IP != "" {
				cfg.Static = append(cfg.Static, in.IP)
			} else if in.Hostname != "" {
				cfg.Static = append(cfg.Static, in.Hostname)
			}
		}
	}
	return cfg
}

// Published is what each object (an Ingress today) publishes in its
// status.loadBalancer, by ref.
type Published = map[model.ObjectRef][]networkingv1.IngressLoadBalancerIngress

// Decide returns the status.loadBalancer.ingress list for every Ingress
// of our class in res. Rules:
//   - a refused Ingress publishes nothing;
//   - an accepted Ingress publishes its VIP then FIP once an agent reports
//     it runs the current spec of its LoadBalancer; until then it keeps what it published
//     before (nothing, for a new one), so a re-apply never makes status
//     flap;
//   - lists are deduplicated and stable.
func Decide(res *translate.Result, lbs map[string]*model.LoadBalancer, prev Published, cfg Addresses) Published {
	out := make(Published, len(res.Ours))
	for key := range res.Ours {
		uuid, ok := res.Accepted[key]
		if !ok {
			continue
		}
		cfg := cfg
		if key.Kind == model.KindService || key.Kind == model.KindGateway {
			// A native Service and a Gateway publish their own VIP and
			// FIP: the static or --status-service addresses front the
			// Ingresses.
			cfg = Addresses{}
		}
		lb := lbs[uuid]
		switch {
		case lb == nil:
		case cfg.Service != "" && len(cfg.Static) == 0:
			// The status Service has no address (yet, or any more): keep
			// what is published rather than flap to nothing.
			out[key] = prev[key]
		case len(prev[key]) == 0 && lb.Serving():
			// First publication: only once an agent runs this very spec,
			// so an address never answers before its routes do.
			out[key] = addressesOf(key, lb, cfg, prev[key])
		case len(prev[key]) > 0 && (lb.Status.State == model.StateActive || lb.Status.State == model.StateError):
			// Already published: an update in flight, or one that failed
			// while the previous config keeps serving, changes nothing
			// unless the addresses themselves change.
			out[key] = addressesOf(key, lb, cfg, prev[key])
		case len(prev[key]) > 0:
			out[key] = prev[key]
		}
	}
	return out
}

// addressesOf is what key publishes: the static list, else the VIP and
// FIP; a Gateway that asked for an address (spec.addresses) publishes
// that one only, as the spec's status.addresses lists what was asked.
// When prev is that already it is returned itself: a pass decides every
// Ingress's status after each agent report, and nearly all are unchanged
// (at 3,000 Ingresses the lists allocated were most of a pass's cost).
func addressesOf(key model.ObjectRef, lb *model.LoadBalancer, cfg Addresses, prev []networkingv1.IngressLoadBalancerIngress) []networkingv1.IngressLoadBalancerIngress {
	list := cfg.Static
	switch {
	case len(list) > 0:
	case key.Kind == model.KindGateway && lb.RequestedFIP != "":
		list = []string{lb.FIP}
	default:
		list = []string{lb.VIP, lb.FIP}
	}
	if len(prev) > 0 && publishes(prev, list) {
		return prev
	}
	var out []networkingv1.IngressLoadBalancerIngress
	for a := range distinct(list) {
		out = append(out, entryOf(a))
	}
	return out
}

// distinct yields list's addresses in order, without empty or repeated
// ones (lists hold two or a few: a scan beats a set).
func distinct(list []string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for i, a := range list {
			if a == "" || slices.Contains(list[:i], a) {
				continue
			}
			if !yield(a) {
				return
			}
		}
	}
}

// entryOf is a as a status entry: an IP when it parses as one, else a
// hostname.
func entryOf(a string) networkingv1.IngressLoadBalancerIngress {
	if _, err := netip.ParseAddr(a); err == nil {
		return networkingv1.IngressLoadBalancerIngress{IP: a}
	}
	return networkingv1.IngressLoadBalancerIngress{Hostname: a}
}

// publishes reports whether prev is exactly what addressesOf makes of
// list: its distinct addresses in order, nothing else in the entries.
func publishes(prev []networkingv1.IngressLoadBalancerIngress, list []string) bool {
	n := 0
	for a := range distinct(list) {
		if n == len(prev) {
			return false
		}
		want, got := entryOf(a), prev[n]
		if got.IP != want.IP || got.Hostname != want.Hostname || len(got.Ports) > 0 {
			return false
		}
		n++
	}
	return n == len(prev)
}

// Equal reports whether two published lists are the same, so writers can
// skip no-op writes.
func Equal(a, b []networkingv1.IngressLoadBalancerIngress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].IP != b[i].IP || a[i].Hostname != b[i].Hostname {
			return false
		}
	}
	return true
}

// String renders a published list for logs: "127.10.0.1,127.20.0.1".
func String(list []networkingv1.IngressLoadBalancerIngress) string {
	parts := make([]string, 0, len(list))
	for _, a := range list {
		if a.IP != "" {
			parts = append(parts, a.IP)
		} else {
			parts = append(parts, a.Hostname)
		}
	}
	return strings.Join(parts, ",")
}

// Keys returns the map's keys sorted, for deterministic iteration.
func Keys[V any](m map[model.ObjectRef]V) []model.ObjectRef {
	keys := make([]model.ObjectRef, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Less(keys[j]) })
	return keys
}
