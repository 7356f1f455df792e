package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"pier.dev/pier/internal/model"
)

// Placement labels. Every LoadBalancer carries one label per node its
// placement names, so that a node's agent can watch only the load
// balancers placed on it: without them every agent received and decoded
// every change of every load balancer, which at ten nodes was the largest
// share of pier's CPU in a cold start. The marker says the labels are kept
// by the writer: an object without it was written by a controller that
// predates them, and an agent that finds one watches everything again.
const (
	// MarkerLabel is on every LoadBalancer whose placement labels are
	// kept; its value is the scheme's version.
	MarkerLabel      = "pier.dev/placement-labels"
	markerValue      = "v1"
	nodeLabelPrefix  = "node.pier.dev/"
	roleActive       = "active"
	roleStandby      = "standby"
	roleECMP         = "ecmp"
	unmarkedSelector = "!" + MarkerLabel
)

// NodeLabel is the label key that names node in a LoadBalancer's
// placement: node.pier.dev/<node>, so that `kubectl get loadbalancers -l
// node.pier.dev/<node>` lists what a node serves. A node name that is not a
// valid label name (longer than 63 characters) is replaced by a digest of
// it; a digest that matched another node's name would only send that node
// more events, since agents still read the placement itself.
func NodeLabel(node string) string {
	if len(validation.IsQualifiedName(node)) == 0 && !strings.Contains(node, "/") {
		return nodeLabelPrefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return nodeLabelPrefix + "sha256-" + hex.EncodeToString(sum[:])[:40]
}

// placementLabels are the labels p gives a LoadBalancer: the marker, and
// each node's role.
func placementLabels(p model.Placement) map[string]string {
	out := map[string]string{MarkerLabel: markerValue}
	if len(p.ECMP) > 0 {
		for _, n := range p.ECMP {
			out[NodeLabel(n)] = roleECMP
		}
		return out
	}
	if p.Active != "" {
		out[NodeLabel(p.Active)] = roleActive
	}
	if p.Standby != "" {
		out[NodeLabel(p.Standby)] = roleStandby
	}
	return out
}

// withPlacementLabels returns u's labels with the placement labels of p in
// place of any it had: labels others set are kept.
func withPlacementLabels(u *unstructured.Unstructured, p model.Placement) map[string]string {
	out := map[string]string{}
	for k, v := range u.GetLabels() {
		if k != MarkerLabel && !strings.HasPrefix(k, nodeLabelPrefix) {
			out[k] = v
		}
	}
	maps.Copy(out, placementLabels(p))
	return out
}

// labelsCurrent reports whether u carries exactly the placement labels of
// p.
func labelsCurrent(u *unstructured.Unstructured, p model.Placement) bool {
	return maps.Equal(u.GetLabels(), withPlacementLabels(u, p))
}

// LabelPlacements writes the placement labels on every LoadBalancer that
// lacks them or whose labels no longer match its placement (objects
// written by a controller that predates them). The controller runs it when
// it starts to lead; until it has, agents watch every load balancer. It
// returns how many objects it labelled. An object that changed meanwhile
// is left to the write that changed it.
func (s *Store) LabelPlacements(ctx context.Context) (int, error) {
	items, _, err := s.list(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("label placements: list: %w", err)
	}
	labelled := 0
	var errs []error
	for _, u := range items {
		lb, err := decode(u)
		if err != nil {
			continue // List and Watch report it
		}
		if labelsCurrent(u, lb.Placement) {
			continue
		}
		written, err := s.relabel(ctx, u, lb.Placement)
		switch {
		case lostRace(err):
			s.log.Debug("placement labels: object changed meanwhile; its writer labels it", "uuid", u.GetName())
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", u.GetName(), err))
		case written:
			labelled++
		}
	}
	if err := errors.Join(errs...); err != nil {
		return labelled, fmt.Errorf("label placements: %w", err)
	}
	return labelled, nil
}

// relabel updates u's labels alone, on top of its resourceVersion.
func (s *Store) relabel(ctx context.Context, u *unstructured.Unstructured, p model.Placement) (bool, error) {
	defer s.lock(u.GetName())()
	if c := s.cache.get(u.GetName()); c != nil && newerVersion(c.GetResourceVersion(), u.GetResourceVersion()) {
		return false, nil // this process wrote it since the list, labels included
	}
	w := u.DeepCopy()
	w.SetLabels(withPlacementLabels(u, p))
	written, err := s.client.Update(ctx, w, s.updateOptions())
	if err != nil {
		s.cache.forget(u.GetName())
		return false, err
	}
	s.cache.put(written)
	return true, nil
}

// watchSelector is the label selector a watch uses: for a node's agent
// the load balancers placed on it, unless some object is not labelled yet
// (then, and for the controller, every load balancer: "").
func (s *Store) watchSelector(ctx context.Context) (string, error) {
	if s.opts.Node == "" {
		return "", nil
	}
	// resourceVersion 0: from the API server's watch cache, which
	// filters by label in memory. A consistent read went to etcd, which
	// returned every object for the server to filter, a page at a time
	// (empty pages with more to read): at 50 agents that was most of the
	// API server's CPU at rest. A cache a moment stale only delays the
	// narrowing by a check.
	page, err := s.client.List(ctx, metav1.ListOptions{LabelSelector: unmarkedSelector, ResourceVersion: "0"})
	if err != nil {
		return "", fmt.Errorf("look for load balancers without placement labels: %w", err)
	}
	if len(page.Items) > 0 {
		return "", nil
	}
	return NodeLabel(s.opts.Node), nil
}
