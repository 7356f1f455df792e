package translate

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/source"
)

// TestEndpointIndexUpdate: an index moved along a series of snapshots
// (slices changed in place, added, removed; Services added and removed;
// objects reordered) equals the index built for the last one, and gives
// the objects a pass over the snapshot gives.
func TestEndpointIndexUpdate(t *testing.T) {
	base := endpointFixture(t)
	x := IndexEndpoints(base)
	if !x.Of(base) {
		t.Fatal("a fresh index is not of its snapshot")
	}
	steps := []struct {
		name string
		next func(prev *source.Snapshot) *source.Snapshot
	}{
		{"a slice changed in place", func(prev *source.Snapshot) *source.Snapshot {
			return withSlice(prev, endpointSlice(t, "web", "", "10.244.1.7"))
		}},
		{"a second slice of a Service", func(prev *source.Snapshot) *source.Snapshot {
			next := *prev
			es := endpointSlice(t, "web", "", "10.244.1.9")
			es.Name = "web-2"
			next.EndpointSlices = append(slices.Clone(prev.EndpointSlices), es)
			return &next
		}},
		{"a Service and its slice added", func(prev *source.Snapshot) *source.Snapshot {
			next := *prev
			next.Services = append(slices.Clone(prev.Services), &corev1.Service{})
			next.Services[len(next.Services)-1].Namespace, next.Services[len(next.Services)-1].Name = "shop", "late"
			next.EndpointSlices = append(slices.Clone(prev.EndpointSlices), endpointSlice(t, "late", "", "10.244.9.1"))
			return &next
		}},
		{"the first slice removed", func(prev *source.Snapshot) *source.Snapshot {
			next := *prev
			next.EndpointSlices = slices.Clone(prev.EndpointSlices[1:])
			return &next
		}},
		{"Services and slices reversed", func(prev *source.Snapshot) *source.Snapshot {
			next := *prev
			next.Services, next.EndpointSlices = slices.Clone(prev.Services), slices.Clone(prev.EndpointSlices)
			slices.Reverse(next.Services)
			slices.Reverse(next.EndpointSlices)
			return &next
		}},
		{"a Service removed", func(prev *source.Snapshot) *source.Snapshot {
			next := *prev
			next.Services = slices.DeleteFunc(slices.Clone(prev.Services), func(s *corev1.Service) bool { return s.Name == "api" })
			return &next
		}},
	}
	prev := base
	for _, step := range steps {
		next := step.next(prev)
		x.Update(prev, next)
		if !x.Of(next) || x.Of(prev) {
			t.Fatalf("%s: the moved index is not of the new snapshot alone", step.name)
		}
		fresh := IndexEndpoints(next)
		if !reflect.DeepEqual(sortedIndex(x), sortedIndex(fresh)) {
			t.Fatalf("%s: the moved index differs from one built for the snapshot:\n got %v\nwant %v", step.name, sortedIndex(x), sortedIndex(fresh))
		}
		for _, svc := range []string{"shop/web", "shop/api", "shop/late", "shop/errors", "shop/none"} {
			changed := newServiceSet(map[string]bool{svc: true})
			part, ok := x.part(changed)
			if !ok {
				t.Fatalf("%s: %s: the index refused a snapshot without duplicates", step.name, svc)
			}
			if want := passOver(next, changed); !sameObjects(part, want) {
				t.Fatalf("%s: %s: the index gives %d Services and %d slices, a pass %d and %d",
					step.name, svc, len(part.Services), len(part.EndpointSlices), len(want.Services), len(want.EndpointSlices))
			}
		}
		prev = next
	}
}

// TestEndpointIndexDuplicates: two Services of one name, or two slices of
// one name for a Service, are left to the pass, whose order decides which
// counts; EndpointMembers still gives a full translation's result.
func TestEndpointIndexDuplicates(t *testing.T) {
	opts := DefaultOptions()
	base := endpointFixture(t)
	prev := fullTranslate(base, opts)
	dupSlice := *base
	dupSlice.EndpointSlices = append(slices.Clone(base.EndpointSlices), endpointSlice(t, "web", "", "10.244.1.42"))
	dupService := *base
	for _, svc := range base.Services {
		if svc.Name == "web" {
			dupService.Services = append(slices.Clone(base.Services), svc.DeepCopy())
		}
	}
	for name, snap := range map[string]*source.Snapshot{"two slices web-1": &dupSlice, "two Services web": &dupService} {
		x := IndexEndpoints(snap)
		if _, ok := x.part(newServiceSet(map[string]bool{"shop/web": true})); ok {
			t.Fatalf("%s: the index gave objects of a duplicated name", name)
		}
		got, _, ok := EndpointMembers(prev, IndexPools(prev), x, snap, map[string]bool{"shop/web": true}, opts)
		want, _, wantOK := EndpointMembers(prev, IndexPools(prev), nil, snap, map[string]bool{"shop/web": true}, opts)
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: with the index: ok %v, without %v; results equal %v", name, ok, wantOK, reflect.DeepEqual(got, want))
		}
	}
	// An index of another snapshot is not used.
	stale := IndexEndpoints(base)
	next := withSlice(base, endpointSlice(t, "web", "", "10.244.1.7"))
	got, _, ok := EndpointMembers(prev, IndexPools(prev), stale, next, map[string]bool{"shop/web": true}, opts)
	if want := fullTranslate(next, opts); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("with an index of the previous snapshot: ok %v, equal to a full translation %v", ok, reflect.DeepEqual(got, want))
	}
}

// sortedIndex is x's content with each list sorted, for comparing indexes
// whose lists were built in different orders.
func sortedIndex(x *EndpointIndex) map[[2]string][]string {
	out := map[[2]string][]string{}
	for k, list := range x.services {
		for _, svc := range list {
			out[k] = append(out[k], "service "+svc.Namespace+"/"+svc.Name)
		}
	}
	for k, list := range x.slices {
		for _, es := range list {
			out[k] = append(out[k], "slice "+es.Namespace+"/"+es.Name+"@"+es.Endpoints[0].Addresses[0])
		}
	}
	for _, list := range out {
		slices.Sort(list)
	}
	return out
}

// sameObjects: the same Services and slices (the same pointers), in any
// order.
func sameObjects(a, b *source.Snapshot) bool {
	return sameSet(a.Services, b.Services) && sameSet(a.EndpointSlices, b.EndpointSlices)
}

func sameSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}
