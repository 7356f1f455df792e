package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/ipam"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/store/bolt"
	"pier.dev/pier/internal/translate"
)

// BenchmarkEndpointChange times the pipeline's share of an endpoint
// change with 1,000 Ingresses, one load balancer each, all on one
// Service: one of 1,000 other Services' only endpoint flips, which one
// load balancer uses. "full" translates everything again, as every
// rebuild did before endpoint changes were incremental.
func BenchmarkEndpointChange(b *testing.B) {
	for _, mode := range []string{"incremental", "full"} {
		b.Run(mode, func(b *testing.B) {
			p, snap := benchPipeline(b, 1000)
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
					p.translated = nil
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
// directly (no Run loop, no store watch).
func benchPipeline(b *testing.B, n int) (*Pipeline, *source.Snapshot) {
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
	if len(p.result.Accepted) != n || len(p.result.LoadBalancers) != n {
		b.Fatalf("accepted %d, load balancers %d, problems %v", len(p.result.Accepted), len(p.result.LoadBalancers), p.result.Problems[:min(3, len(p.result.Problems))])
	}
	return p, snap
}
