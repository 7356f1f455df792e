package pipeline

import (
	"context"
	"testing"

	"pier.dev/pier/internal/controller"
	"pier.dev/pier/internal/model"
)

// A reconcile that refused a load balancer (here a namespace's quota)
// leaves no base for a patch: the result it publishes lacks the refused
// Ingress, which the translation does not. The next endpoint change then
// gives what a full rebuild of the same snapshot gives, and the Ingress
// stays refused.
func TestRefusalThenEndpointChangeEqualsFullRebuild(t *testing.T) {
	inc, snap := benchPipeline(t, 5, 0)
	full, _ := benchPipeline(t, 5, 0)
	for _, p := range []*Pipeline{inc, full} {
		p.reconciler.Quota = controller.Quota{LoadBalancers: 5}
	}
	ctx := context.Background()
	refused := clone(snap)
	refused.Ingresses = append(refused.Ingresses, benchNewIngress(snap, 0, false))
	newRef := model.IngressRef("ns", "new-0")
	for _, p := range []*Pipeline{inc, full} {
		if err := p.take(ctx, refused); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := inc.result.Accepted[newRef]; ok {
		t.Fatalf("the Ingress past the quota is accepted: %v", inc.Book.Of(newRef))
	}
	if inc.last.translated != nil {
		t.Fatal("a result the reconciler refused part of is kept as the base of the next patch")
	}
	// Another Service's endpoints than the refused Ingress's (web-0): a
	// patch of a base that held it would not touch its load balancer,
	// and the reconciler would not see it again.
	next := clone(refused)
	es := refused.EndpointSlices[1].DeepCopy()
	es.ResourceVersion = "changed"
	es.Endpoints[0].Addresses = []string{"10.244.9.9"}
	next.EndpointSlices[1] = es
	if err := inc.take(ctx, next); err != nil {
		t.Fatal(err)
	}
	full.last.forget()
	if err := full.take(ctx, next); err != nil {
		t.Fatal(err)
	}
	if diff := pipelineDiff(inc, full, next); diff != "" {
		t.Fatal(diff)
	}
	if _, ok := inc.result.Accepted[newRef]; ok {
		t.Fatal("the refused Ingress is accepted after the endpoint change")
	}
}
