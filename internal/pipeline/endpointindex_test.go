package pipeline

import (
	"context"
	"reflect"
	"testing"
)

// TestIndexForEndpoints: after a rebuild, the indexes an endpoint change
// uses are stale until the idle build (indexForEndpoints); an endpoint
// change then finds them built, moves the endpoint index along and keeps
// the pool index, and an Ingress change moves the endpoint index but
// leaves the pool index for the next idle build.
func TestIndexForEndpoints(t *testing.T) {
	p, snap := benchPipeline(t, 20, 0)
	ctx := context.Background()
	if p.indexedForEndpoints() {
		t.Fatal("indexed after the first rebuild, before any idle time")
	}
	p.indexForEndpoints(p.snap)
	if !p.indexedForEndpoints() {
		t.Fatal("not indexed after the idle build")
	}
	pools, objects := p.last.pools, p.last.endpoints

	next := clone(snap)
	es := snap.EndpointSlices[3].DeepCopy()
	es.ResourceVersion = "changed"
	es.Endpoints[0].Addresses = []string{"10.244.9.9"}
	next.EndpointSlices[3] = es
	if err := p.take(ctx, next); err != nil {
		t.Fatal(err)
	}
	if !p.indexedForEndpoints() || p.last.endpoints != objects || !sameMap(p.last.pools, pools) {
		t.Fatalf("after an endpoint change: indexed %v, endpoint index moved along %v, pool index kept %v",
			p.indexedForEndpoints(), p.last.endpoints == objects, sameMap(p.last.pools, pools))
	}
	found := false
	for _, lb := range p.result.LoadBalancers {
		for _, pool := range lb.Pools {
			if pool.Service != "web-3" {
				continue
			}
			found = true
			if len(pool.Members) != 1 || pool.Members[0].Address != "10.244.9.9" {
				t.Fatalf("the changed Service's members: %+v", pool.Members)
			}
		}
	}
	if !found {
		t.Fatal("no pool of the changed Service")
	}

	ingressChange := clone(next)
	ing := next.Ingresses[5].DeepCopy()
	ing.Spec.Rules[0].Host = "renamed.example.com"
	ing.Generation++
	ing.ResourceVersion = "renamed"
	ingressChange.Ingresses[5] = ing
	if err := p.take(ctx, ingressChange); err != nil {
		t.Fatal(err)
	}
	if !p.last.endpoints.Of(ingressChange) || p.last.endpoints != objects {
		t.Fatal("an Ingress change did not move the endpoint index along")
	}
	if p.indexedForEndpoints() {
		t.Fatal("the pool index of the result before the Ingress change counts as built")
	}
	p.indexForEndpoints(p.snap)
	if !p.indexedForEndpoints() {
		t.Fatal("not indexed after the second idle build")
	}
}

// sameMap: a and b are one map, not two with the same content.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
