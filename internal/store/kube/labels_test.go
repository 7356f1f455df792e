package kube

import (
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
	"pier.dev/pier/internal/store/storetest"
)

func TestNodeLabel(t *testing.T) {
	long := strings.Repeat("n", 64)
	for _, tc := range []struct{ node, want string }{
		{"node-a", "node.pier.dev/node-a"},
		{"ip-10-0-0-1.eu-west-1.compute.internal", "node.pier.dev/ip-10-0-0-1.eu-west-1.compute.internal"},
		{long, "node.pier.dev/sha256-"},
		{"a/b", "node.pier.dev/sha256-"},
	} {
		got := NodeLabel(tc.node)
		if !strings.HasPrefix(got, tc.want) || (strings.HasSuffix(tc.want, "-") && len(got) != len(tc.want)+40) {
			t.Errorf("NodeLabel(%q) = %q, want %q…", tc.node, got, tc.want)
		}
	}
	if NodeLabel(long) == NodeLabel(long+"m") {
		t.Error("two long node names share a label")
	}
}

// labelsOf reads the object's labels straight from the API server.
func labelsOf(t *testing.T, s *Store, uuid string) map[string]string {
	t.Helper()
	u, err := s.client.Get(t.Context(), uuid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return u.GetLabels()
}

// TestPlacementLabelsFollowThePlacement: every write keeps one label per
// placed node with its role, drops those of nodes it no longer names, and
// keeps labels someone else set.
func TestPlacementLabelsFollowThePlacement(t *testing.T) {
	s := newStore(t, nil, nil)
	ctx := t.Context()
	lb := storetest.Sample("labelled")
	if err := s.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{MarkerLabel: "v1", "node.pier.dev/node-a": "active", "node.pier.dev/node-b": "standby"}
	if got := labelsOf(t, s, lb.UUID); !maps.Equal(got, want) {
		t.Fatalf("after create: labels %v, want %v", got, want)
	}

	// Someone else's label survives the controller's writes.
	u, err := s.client.Get(ctx, lb.UUID, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.SetLabels(map[string]string{"team": "shop", MarkerLabel: "v1", "node.pier.dev/node-a": "active", "node.pier.dev/node-b": "standby"})
	if _, err := s.client.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	lb.Placement = model.Placement{Active: "node-c", Standby: "node-a", RouterID: 43}
	if err := s.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"team": "shop", MarkerLabel: "v1", "node.pier.dev/node-c": "active", "node.pier.dev/node-a": "standby"}
	if got := labelsOf(t, s, lb.UUID); !maps.Equal(got, want) {
		t.Fatalf("after a move: labels %v, want %v", got, want)
	}

	lb.Provider = model.ProviderNative
	lb.Placement = model.Placement{Active: "node-a", Standby: "node-b", ECMP: []string{"node-a", "node-b", "node-d"}}
	if err := s.PutSpec(ctx, lb); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"team": "shop", MarkerLabel: "v1", "node.pier.dev/node-a": "ecmp", "node.pier.dev/node-b": "ecmp", "node.pier.dev/node-d": "ecmp"}
	if got := labelsOf(t, s, lb.UUID); !maps.Equal(got, want) {
		t.Fatalf("ECMP: labels %v, want %v", got, want)
	}
}

// writeUnlabelled stores lb the way a controller that predates the labels
// did: the same object, with no labels.
func writeUnlabelled(t *testing.T, s *Store, lb *model.LoadBalancer) {
	t.Helper()
	spec, err := encodeSpec(lb, false)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": lb.UUID}, "spec": spec,
	}}
	if _, err := s.client.Create(t.Context(), u, s.createOptions()); err != nil {
		t.Fatal(err)
	}
}

// moveKeepingLabels changes lb's placement as an older controller would:
// on top of the stored object, its metadata (labels too) kept as it was.
func moveKeepingLabels(t *testing.T, s *Store, uuid string, p model.Placement) {
	t.Helper()
	u, err := s.client.Get(t.Context(), uuid, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := decode(u)
	if err != nil {
		t.Fatal(err)
	}
	cur.Placement = p
	spec, err := encodeSpec(cur, hasSpecCreatedAt(u))
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = spec
	if _, err := s.client.Update(t.Context(), u, s.updateOptions()); err != nil {
		t.Fatal(err)
	}
}

func nodeStore(t *testing.T, node string) (*Store, func(string) int) {
	t.Helper()
	log, count := newRecorder(t)
	s, err := New(cluster(t).Config(), Options{Node: node, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, count
}

// expectEvent reads the next event and fails unless it is typ for uuid.
func expectEvent(t *testing.T, ch <-chan store.Event, typ store.EventType, uuid string) store.Event {
	t.Helper()
	ev := storetest.Next(t, ch)
	if ev.Type != typ || ev.LoadBalancer.UUID != uuid {
		t.Fatalf("got %s %s, want %s %s", ev.Type, ev.LoadBalancer.UUID, typ, uuid)
	}
	return ev
}

// expectQuiet fails if an event arrives within d.
func expectQuiet(t *testing.T, ch <-chan store.Event, d time.Duration) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("unexpected %s %s", ev.Type, ev.LoadBalancer.UUID)
	case <-time.After(d):
	}
}

func placed(uuid string, p model.Placement) *model.LoadBalancer {
	lb := storetest.Sample(uuid)
	lb.Placement = p
	if len(p.ECMP) > 0 {
		lb.Provider = model.ProviderNative
	}
	return lb
}

// TestNodeWatchFollowsOnlyItsLoadBalancers: a node's watch replays the load
// balancers placed on it, as active, standby or one of an ECMP set, and
// none of the others; one moved away arrives as a DELETE, one moved here
// as a PUT, and changes elsewhere send nothing.
func TestNodeWatchFollowsOnlyItsLoadBalancers(t *testing.T) {
	controller := newStore(t, nil, nil)
	ctx := t.Context()
	for _, lb := range []*model.LoadBalancer{
		placed("here-active", model.Placement{Active: "node-a", Standby: "node-b"}),
		placed("here-standby", model.Placement{Active: "node-b", Standby: "node-a"}),
		placed("here-ecmp", model.Placement{Active: "node-b", Standby: "node-c", ECMP: []string{"node-b", "node-c", "node-a"}}),
		placed("elsewhere", model.Placement{Active: "node-b", Standby: "node-c"}),
	} {
		if err := controller.PutSpec(ctx, lb); err != nil {
			t.Fatal(err)
		}
	}
	agent, count := nodeStore(t, "node-a")
	ch, err := agent.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, uuid := range []string{"here-active", "here-ecmp", "here-standby"} {
		expectEvent(t, ch, store.EventPut, uuid)
	}
	expectQuiet(t, ch, 300*time.Millisecond)
	if count("watches only those placed on it") != 1 {
		t.Fatal("the node's watch did not say it follows only its load balancers")
	}

	if err := controller.PutSpec(ctx, placed("elsewhere", model.Placement{Active: "node-c", Standby: "node-b"})); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, ch, 300*time.Millisecond)

	if err := controller.PutSpec(ctx, placed("here-active", model.Placement{Active: "node-b", Standby: "node-c"})); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ch, store.EventDelete, "here-active")
	if err := controller.PutSpec(ctx, placed("elsewhere", model.Placement{Active: "node-a", Standby: "node-b"})); err != nil {
		t.Fatal(err)
	}
	if ev := expectEvent(t, ch, store.EventPut, "elsewhere"); ev.LoadBalancer.Placement.Active != "node-a" {
		t.Fatalf("PUT carries placement %+v", ev.LoadBalancer.Placement)
	}
	if err := controller.Delete(ctx, "here-standby"); err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ch, store.EventDelete, "here-standby")
}

// TestNodeWatchAcrossAnUpgrade: objects an older controller wrote have no
// labels, so a node's watch follows every load balancer; once the new
// controller has labelled them (LabelPlacements), the next check narrows
// the watch and retracts what is not placed here. If an older controller
// then moves a load balancer, leaving its labels stale, the watch follows
// every load balancer again.
func TestNodeWatchAcrossAnUpgrade(t *testing.T) {
	defer func(d time.Duration) { selectorCheck = d }(selectorCheck)
	selectorCheck = 200 * time.Millisecond
	controller := newStore(t, nil, nil)
	ctx := t.Context()
	writeUnlabelled(t, controller, placed("old-here", model.Placement{Active: "node-a", Standby: "node-b"}))
	writeUnlabelled(t, controller, placed("old-elsewhere", model.Placement{Active: "node-b", Standby: "node-c"}))

	agent, count := nodeStore(t, "node-a")
	ch, err := agent.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	expectEvent(t, ch, store.EventPut, "old-elsewhere")
	expectEvent(t, ch, store.EventPut, "old-here")
	if count("watches every load balancer") != 1 {
		t.Fatal("the watch did not say why it follows every load balancer")
	}

	n, err := controller.LabelPlacements(ctx)
	if err != nil || n != 2 {
		t.Fatalf("LabelPlacements = %d, %v; want 2 labelled", n, err)
	}
	if again, err := controller.LabelPlacements(ctx); err != nil || again != 0 {
		t.Fatalf("second LabelPlacements = %d, %v; want nothing to do", again, err)
	}
	// The labels are a metadata change: the model's view is unchanged,
	// so the watch sends nothing until it narrows, then retracts the
	// load balancer that is not placed here.
	expectEvent(t, ch, store.EventDelete, "old-elsewhere")
	expectQuiet(t, ch, 500*time.Millisecond)
	if count("watches only those placed on it") != 1 {
		t.Fatal("the watch did not narrow after the labels were written")
	}

	moveKeepingLabels(t, controller, "old-here", model.Placement{Active: "node-c", Standby: "node-b"})
	if ev := expectEvent(t, ch, store.EventPut, "old-here"); ev.LoadBalancer.Placement.Active != "node-c" {
		t.Fatalf("PUT carries placement %+v", ev.LoadBalancer.Placement)
	}
	// Watching everything again: the re-list brings back the load
	// balancer placed elsewhere, and later changes to it arrive.
	expectEvent(t, ch, store.EventPut, "old-elsewhere")
	if count("placement labels are stale") != 1 {
		t.Fatal("stale labels were not reported")
	}
}
