package kube

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// specAttempts bounds PutSpec's retries after writes that left the spec
// alone (agents reporting status in a tight loop).
const specAttempts = 10

// PutSpec creates lb or replaces everything but its Status (agents own it)
// and CreatedAt (kept from the first write). A new LoadBalancer keeps a
// non-zero lb.CreatedAt in spec.createdAt, or gets the object's
// creationTimestamp; its Status is lb.Status with an empty State made
// PENDING. A PutSpec that changes nothing writes nothing.
//
// If another process changes the spec between PutSpec's read and its write,
// PutSpec returns an error matching ErrConflict and the other write stands.
func (s *Store) PutSpec(ctx context.Context, lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("put spec: load balancer has no UUID")
	}
	defer s.lock(lb.UUID)()
	for range specAttempts {
		again, err := s.putSpecOnce(ctx, lb)
		if !again {
			if err != nil {
				return fmt.Errorf("put spec %s: %w", lb.UUID, err)
			}
			return nil
		}
		s.log.Debug("spec write conflicted with a status write; retrying", "uuid", lb.UUID)
	}
	return fmt.Errorf("put spec %s: %w: still conflicting after %d attempts", lb.UUID, ErrConflict, specAttempts)
}

// putSpecOnce is one read-compare-write. again means the write lost to a
// change that did not touch the spec.
func (s *Store) putSpecOnce(ctx context.Context, lb *model.LoadBalancer) (again bool, err error) {
	u, err := s.get(ctx, lb.UUID)
	if errors.Is(err, store.ErrNotFound) {
		return false, s.create(ctx, lb)
	}
	if err != nil {
		return false, err
	}
	cur, err := decode(u)
	if err != nil {
		return false, err
	}
	next := *lb
	next.Status, next.CreatedAt = cur.Status, cur.CreatedAt
	if specKey(&next) == specKey(cur) {
		return false, nil
	}
	spec, err := encodeSpec(&next, hasSpecCreatedAt(u))
	if err != nil {
		return false, err
	}
	u.Object["spec"] = spec
	s.hook(lb.UUID)
	_, err = s.client.Update(ctx, u, s.updateOptions())
	if !apierrors.IsConflict(err) {
		return false, err
	}
	fresh, ferr := s.Get(ctx, lb.UUID)
	switch {
	case errors.Is(ferr, store.ErrNotFound):
		return false, fmt.Errorf("%w: deleted meanwhile (%w)", ErrConflict, err)
	case ferr != nil:
		return false, ferr
	case specKey(fresh) != specKey(cur):
		return false, fmt.Errorf("%w (%w)", ErrConflict, err)
	}
	return true, nil
}

// create writes a new object, then its initial status: the API server
// ignores status in a create when the status subresource is on.
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
	s.hook(lb.UUID)
	created, err := s.client.Create(ctx, u, s.createOptions())
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%w: created meanwhile (%w)", ErrConflict, err)
	}
	if err != nil {
		return err
	}
	status := lb.Status
	if status.State == "" {
		status.State = model.StatePending
	}
	if created.Object["status"], err = encodeStatus(status); err != nil {
		return err
	}
	_, err = s.client.UpdateStatus(ctx, created, s.updateOptions())
	if apierrors.IsConflict(err) {
		// An agent reported already; its status is newer than ours.
		return nil
	}
	if err != nil {
		return fmt.Errorf("initial status (the object exists and reads as PENDING): %w", err)
	}
	return nil
}
