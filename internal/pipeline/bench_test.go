package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// BenchmarkEndpointChange times the pipeline's share of an endpoint
// change with 1,000 and 3,000 Ingresses, one load balancer and one
// Service each: one Service's only endpoint flips, which one load
// balancer uses. "full" translates everything again, as every rebuild did
// before endpoint changes were incremental.
func BenchmarkEndpointChange(b *testing.B) {
	for _, c := range []struct {
		mode string
		n    int
	}{{"incremental", 1000}, {"incremental", 3000}, {"full", 1000}} {
		b.Run(fmt.Sprintf("%s-%d", c.mode, c.n), func(b *testing.B) {
			mode := c.mode
			p, snap := benchPipeline(b, c.n, 0)
			ctx := context.Background()
			addrs := []string{"10.244.9.1", "10.244.9.2"}
			b.ResetTimer()
			for i := range b.N {
				next := clone(snap)
				es := snap.EndpointSlices[0].DeepCopy()
				es.ResourceVersion = fmt.Sprint(i + 2)
				es.Endpoints[0].Addresses = []string{addrs[i%2]}
				next.EndpointSlices[0] = es
				if mode == "full" {
					p.last.forget()
				}
				if err := p.take(ctx, next); err != nil {
					b.Fatal(err)
				}
				snap = next
			}
		})
	}
}

// benchPipeline is a pipeline with n Ingresses stored, driven by take
// directly (no Run loop, no store watch): the first grouped of them share
// one load balancer (group "shared"), the others have one each.
func benchPipeline(b testing.TB, n, grouped int) (*Pipeline, *source.Snapshot) {
	b.Helper()
	st, err := bolt.Open(filepath.Join(b.TempDir(), "pier.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	alloc, err := ipam.FromCIDRs("10.0.0.0/16", "")
	if err != nil {
		b.Fatal(err)
	}
	p := &Pipeline{Store: st, IPAM: alloc, Translate: translate.DefaultOptions(), Status: &memorySink{},
		Metrics: metrics.New(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p.init()
	p.index = controller.NewIndex(nil)
	p.reconciler = &controller.Reconciler{Store: st, Index: p.index, IPAM: alloc, Logger: p.Logger}

	w := world()
	snap := clone(w)
	snap.Ingresses, snap.Services, snap.EndpointSlices = nil, nil, nil
	for i := range n {
		ing := w.Ingresses[0].DeepCopy()
		ing.Name, ing.UID = fmt.Sprintf("web-%d", i), "" // UUIDs from namespace/name
		ing.Spec.Rules[0].Host = fmt.Sprintf("web-%d.example.com", i)
		ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = fmt.Sprintf("web-%d", i)
		if i < grouped {
			ing.Annotations = map[string]string{annotation.LoadBalancer: "shared"}
		}
		svc := w.Services[1].DeepCopy()
		svc.Name = fmt.Sprintf("web-%d", i)
		es := w.EndpointSlices[0].DeepCopy()
		es.Name, es.Labels = fmt.Sprintf("web-%d-1", i), map[string]string{"kubernetes.io/service-name": svc.Name}
		snap.Ingresses, snap.Services = append(snap.Ingresses, ing), append(snap.Services, svc)
		snap.EndpointSlices = append(snap.EndpointSlices, es)
	}
	if err := p.take(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	if len(p.result.Accepted) != n || len(p.result.LoadBalancers) != n-max(grouped-1, 0) {
		b.Fatalf("accepted %d, load balancers %d, problems %v", len(p.result.Accepted), len(p.result.LoadBalancers), p.result.Problems[:min(3, len(p.result.Problems))])
	}
	return p, snap
}

// BenchmarkIngressChange times the pipeline's share of a new Ingress (the
// manifest read to "load balancer stored" and its status decided) with n
// Ingresses present, one load balancer each plus one group of 100 that
// share one: "own" adds an Ingress with a load balancer of its own,
// "group" one that joins the group. The new Ingress is removed again
// between iterations, outside the timer. "full" translates everything on
// every change, as before Ingress changes were incremental.
func BenchmarkIngressChange(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		for _, kind := range []string{"own", "group"} {
			for _, mode := range []string{"incremental", "full"} {
				b.Run(fmt.Sprintf("%d/%s/%s", n, kind, mode), func(b *testing.B) {
					p, snap := benchPipeline(b, n, 100)
					ctx := context.Background()
					b.ResetTimer()
					for i := range b.N {
						next := clone(snap)
						next.Ingresses = append(next.Ingresses, benchNewIngress(snap, i, kind == "group"))
						if mode == "full" {
							p.last.forget()
						}
						if err := p.take(ctx, next); err != nil {
							b.Fatal(err)
						}
						b.StopTimer()
						if _, ok := p.result.Accepted[model.IngressRef("ns", next.Ingresses[len(next.Ingresses)-1].Name)]; !ok {
							b.Fatalf("new Ingress not accepted: %v", p.Book.Of(model.IngressRef("ns", next.Ingresses[len(next.Ingresses)-1].Name)))
						}
						if mode == "full" {
							p.last.forget()
						}
						if err := p.take(ctx, snap); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					}
				})
			}
		}
	}
}

// BenchmarkIngressChangeParts times each step of a rebuild after a new
// Ingress separately (ms/op of each, as custom metrics): where the time of
// BenchmarkIngressChange goes, translating everything ("full") or only
// the changed Ingresses' load balancers ("incremental").
func BenchmarkIngressChangeParts(b *testing.B) {
	for _, n := range []int{1000, 3000} {
		for _, kind := range []string{"own", "group"} {
			for _, mode := range []string{"incremental", "full"} {
				b.Run(fmt.Sprintf("%d/%s/%s", n, kind, mode), func(b *testing.B) {
					benchParts(b, n, kind == "group", mode == "incremental")
				})
			}
		}
	}
}

func benchParts(b *testing.B, n int, group, incremental bool) {
	p, snap := benchPipeline(b, n, 100)
	ctx := context.Background()
	var parts [5]time.Duration
	step := func(k int, f func()) {
		start := time.Now()
		f()
		parts[k] += time.Since(start)
	}
	for i := range b.N {
		for _, next := range []*source.Snapshot{clone(snap), snap} {
			if next != snap {
				next.Ingresses = append(next.Ingresses, benchNewIngress(snap, i, group))
			}
			p.mu.Lock()
			prev := p.snap
			p.mu.Unlock()
			var e effect
			var res *translate.Result
			step(0, func() { e = classify(prev, next, p.last.refs, "") })
			step(1, func() {
				ok := false
				if incremental && e.ingresses && p.last.translated != nil {
					res, ok = translate.IngressChanges(p.last.translated, prev, next, p.Translate)
				}
				if !ok {
					res = translate.Ingresses(next, p.Translate)
					res.Merge(translate.Services(next, p.Translate))
					res.Merge(gatewayapi.Translate(next, p.Translate))
				}
			})
			step(2, func() {
				if _, err := p.reconciler.Apply(ctx, res, next.Nodes); err != nil {
					b.Fatal(err)
				}
			})
			p.result, p.last.translated = res, res
			step(3, func() { p.last.refs = referencesOf(next, res.Ours) })
			step(4, func() {
				if err := p.statusPass(ctx, next, "rebuild"); err != nil {
					b.Fatal(err)
				}
			})
			p.mu.Lock()
			p.snap = next
			p.mu.Unlock()
		}
	}
	// Two rebuilds per iteration (add, remove): per change.
	for k, name := range []string{"classify", "translate", "apply", "refs", "status"} {
		b.ReportMetric(float64(parts[k].Microseconds())/1000/float64(2*b.N), name+"-ms/op")
	}
}

// benchNewIngress is a new Ingress on web-0's Service, in the group of
// benchPipeline or with a load balancer of its own.
func benchNewIngress(snap *source.Snapshot, i int, group bool) *networkingv1.Ingress {
	ing := snap.Ingresses[len(snap.Ingresses)-1].DeepCopy()
	ing.Name, ing.UID, ing.ResourceVersion = fmt.Sprintf("new-%d", i), "", fmt.Sprint(1000000+i)
	ing.CreationTimestamp = metav1.NewTime(ing.CreationTimestamp.Add(time.Duration(i+1) * time.Second))
	ing.Spec.Rules[0].Host = fmt.Sprintf("new-%d.example.com", i)
	ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "web-0"
	ing.Annotations = nil
	if group {
		ing.Annotations = map[string]string{annotation.LoadBalancer: "shared"}
	}
	return ing
}
