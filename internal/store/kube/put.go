package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pier.dev/pier/internal/apiretry"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// specAttempts bounds PutSpec's retries after writes that left the spec
// alone (agents reporting status in a tight loop).
const specAttempts = 10

// PutSpec creates lb or replaces everything but its Status (agents own it)
// and CreatedAt (kept from the first write). A new LoadBalancer keeps a
// non-zero lb.CreatedAt in spec.createdAt, or gets the object's
// creationTimestamp; it reads as PENDING until an agent reports (PutSpec
// never writes status). A PutSpec that changes nothing writes nothing.
//
// PutSpec writes on top of the version this store last saw (its own last
// write, or a read). If another process changed the spec since, or deleted
// the object, PutSpec returns an error matching ErrConflict and the other
// write stands; the caller re-evaluates and calls again, which starts from
// a fresh read. Writes that left the spec alone (an agent's status) are
// retried over.
//
// PutSpec sets no ownerReferences: an Ingress cannot own a cluster-scoped
// object (the garbage collector ignores the reference), so the controller
// deletes LoadBalancers whose sources are gone.
func (s *Store) PutSpec(ctx context.Context, lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("put spec: load balancer has no UUID")
	}
	defer s.lock(lb.UUID)()
	// base is set once a write lost: the version it was based on, and why.
	var base *unstructured.Unstructured
	var lost error
	if u := s.cache.get(lb.UUID); u != nil && specDiffers(u, lb) {
		err := s.writeSpec(ctx, u, lb)
		if err == nil || !lostRace(err) {
			return wrapPut("put spec", lb.UUID, err)
		}
		base, lost = u, err
	}
	for range specAttempts {
		u, err := s.read(ctx, lb.UUID)
		switch {
		case errors.Is(err, store.ErrNotFound) && base != nil:
			return fmt.Errorf("put spec %s: %w: deleted meanwhile (%w)", lb.UUID, ErrConflict, lost)
		case errors.Is(err, store.ErrNotFound):
			return wrapPut("put spec", lb.UUID, s.create(ctx, lb))
		case err != nil:
			return wrapPut("put spec", lb.UUID, err)
		case base != nil && specKeyOf(u) != specKeyOf(base):
			return fmt.Errorf("put spec %s: %w (%w)", lb.UUID, ErrConflict, lost)
		case !specDiffers(u, lb):
			return nil
		}
		if err = s.writeSpec(ctx, u, lb); err == nil || !lostRace(err) {
			return wrapPut("put spec", lb.UUID, err)
		}
		base, lost = u, err
		s.log.Debug("spec write lost a race; checking what changed", "uuid", lb.UUID)
	}
	return fmt.Errorf("put spec %s: %w: still conflicting after %d attempts", lb.UUID, ErrConflict, specAttempts)
}

// CreateSpec implements store.Creator: an object this store has not seen
// is created without reading it first; if it exists after all (created
// meanwhile, or by an earlier process), PutSpec writes on top of it.
func (s *Store) CreateSpec(ctx context.Context, lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("create spec: load balancer has no UUID")
	}
	if s.cache.get(lb.UUID) == nil {
		unlock := s.lock(lb.UUID)
		err := s.create(ctx, lb)
		unlock()
		if !errors.Is(err, ErrConflict) {
			return wrapPut("create spec", lb.UUID, err)
		}
	}
	return s.PutSpec(ctx, lb)
}

// lostRace: the object changed (409) or went away (404) since it was read.
func lostRace(err error) bool { return apierrors.IsConflict(err) || apierrors.IsNotFound(err) }

func wrapPut(what, uuid string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", what, uuid, err)
}

// specDiffers reports whether writing lb's spec would change u: its spec,
// or the placement labels that go with it.
func specDiffers(u *unstructured.Unstructured, lb *model.LoadBalancer) bool {
	cur, err := decode(u)
	if err != nil {
		return true
	}
	next := *lb
	next.Status, next.CreatedAt = cur.Status, cur.CreatedAt
	return specKey(&next) != specKey(cur) || !labelsCurrent(u, lb.Placement)
}

func specKeyOf(u *unstructured.Unstructured) string {
	lb, err := decode(u)
	if err != nil {
		return "undecodable:" + u.GetResourceVersion()
	}
	return specKey(lb)
}

// writeSpec updates u (with its resourceVersion as precondition) to lb's
// spec, keeping u's CreatedAt, and caches the result.
func (s *Store) writeSpec(ctx context.Context, u *unstructured.Unstructured, lb *model.LoadBalancer) error {
	cur, err := decode(u)
	if err != nil {
		return err
	}
	next := *lb
	next.CreatedAt = cur.CreatedAt
	spec, err := encodeSpec(&next, hasSpecCreatedAt(u))
	if err != nil {
		return err
	}
	w := u.DeepCopy()
	w.Object["spec"] = spec
	w.SetLabels(withPlacementLabels(u, lb.Placement))
	s.hook(lb.UUID)
	written, err := s.client.Update(ctx, w, s.updateOptions())
	if err != nil {
		s.cache.forget(lb.UUID)
		return err
	}
	s.cache.put(written)
	return nil
}

// create writes a new object, then its initial status unless that is a
// bare PENDING: the API server ignores status in a create when the status
// subresource is on.
func (s *Store) create(ctx context.Context, lb *model.LoadBalancer) error {
	spec, err := encodeSpec(lb, !lb.CreatedAt.IsZero())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": lb.UUID},
		"spec":       spec,
	}}
	u.SetLabels(placementLabels(lb.Placement))
	s.hook(lb.UUID)
	created, err := s.client.Create(ctx, u, s.createOptions())
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: created meanwhile (%w)", ErrConflict, err)
	}
	if err != nil {
		return err
	}
	// No status is written: an object without one reads as PENDING
	// (decode), and the controller's role may not write the status
	// subresource (rbac.yaml: agents own status).
	s.cache.put(created)
	return nil
}

// PutNodeStatus merges one node's report into the status of an existing
// LoadBalancer through the status subresource, retrying on a fresh read
// when another writer got in first (the other node's agent, usually): each
// node owns its own entry, so merging on top of the newest version loses
// nobody's report. An unchanged status is not written.
func (s *Store) PutNodeStatus(ctx context.Context, uuid string, report model.NodeStatus) error {
	defer s.lock(uuid)()
	// On top of the cached object first: one round trip when nobody else
	// wrote. A cached "unchanged" proves nothing, so that goes to a read.
	if u := s.cache.get(uuid); u != nil {
		if next, changed := withReport(u, report); changed {
			err := s.writeStatus(ctx, u, next)
			if err == nil || !lostRace(err) {
				return wrapPut("put status", uuid, err)
			}
		}
	}
	err := apiretry.OnConflict(statusBackoff, func() error {
		u, err := s.read(ctx, uuid)
		if err != nil {
			return err
		}
		next, changed := withReport(u, report)
		if !changed {
			return nil
		}
		err = s.writeStatus(ctx, u, next)
		if apierrors.IsConflict(err) {
			s.log.Debug("status write conflicted; retrying on a fresh read", "uuid", uuid)
		}
		return err
	})
	if apierrors.IsNotFound(err) && !errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w (%w)", store.ErrNotFound, err) // deleted between read and write
	}
	return wrapPut("put status", uuid, err)
}

// withReport returns u's status with report merged, and whether that
// changes what is stored. An object that does not decode is overwritten.
func withReport(u *unstructured.Unstructured, report model.NodeStatus) (model.Status, bool) {
	cur, err := decode(u)
	if err != nil {
		return model.Status{Nodes: []model.NodeStatus{report}}, true
	}
	next := *cur
	next.Status = cur.Status.WithReport(report, cur.Placement)
	return next.Status, fullKey(&next) != fullKey(cur)
}

// writeStatus updates u's status (with its resourceVersion as precondition)
// and caches the result.
func (s *Store) writeStatus(ctx context.Context, u *unstructured.Unstructured, status model.Status) error {
	st, err := encodeStatus(status)
	if err != nil {
		return err
	}
	w := u.DeepCopy()
	w.Object["status"] = st
	s.hook(u.GetName())
	written, err := s.client.UpdateStatus(ctx, w, s.updateOptions())
	if err != nil {
		// A lost race makes the cached object stale. A failed round trip
		// (the API server away) does not: forgetting it would send the
		// next write through a GET, which client-go retries for up to
		// 10 s, and the agent reports from the loop that runs its
		// address holder. If the write did land, the next one conflicts
		// and reads again.
		if lostRace(err) {
			s.cache.forget(u.GetName())
		}
		return err
	}
	s.cache.put(written)
	return nil
}
