package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

var _ store.MemberWriter = (*Store)(nil)

// PutMembers implements store.MemberWriter: a change of lb's pool members
// alone is handed to the watchers at once and written to the file by the
// flusher, outside the caller's way; anything else is PutSpec.
func (s *Store) PutMembers(ctx context.Context, lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("put members: load balancer has no UUID")
	}
	what := "put members " + lb.UUID
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oldRaw, err := s.rawLocked(lb.UUID)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if oldRaw == nil {
		return s.updateLocked(what, lb.UUID, specChange(lb))
	}
	old, err := decode(oldRaw)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	next, _ := specChange(lb)(old)
	if same, err := sameButMembers(old, next); err != nil || !same {
		return s.updateLocked(what, lb.UUID, specChange(lb))
	}
	raw, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("%s: encode: %w", what, err)
	}
	if bytes.Equal(raw, oldRaw) {
		return nil
	}
	s.pending[lb.UUID] = raw
	s.notify(lb.UUID, store.EventPut, raw)
	select {
	case s.flushWake <- struct{}{}:
	default:
	}
	return nil
}

// rawLocked is what the store holds for uuid, pending or in the file (a
// copy); nil if nothing. Callers hold s.mu.
func (s *Store) rawLocked(uuid string) ([]byte, error) {
	if raw, ok := s.pending[uuid]; ok {
		return raw, nil
	}
	var raw []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw = bytes.Clone(tx.Bucket(bucketLBs).Get([]byte(uuid)))
		return nil
	})
	return raw, err
}

// sameButMembers reports whether a and b differ in nothing but their
// pools' members.
func sameButMembers(a, b *model.LoadBalancer) (bool, error) {
	strip := func(lb *model.LoadBalancer) ([]byte, error) {
		c := *lb
		c.Pools = make([]model.Pool, len(lb.Pools))
		for i, p := range lb.Pools {
			p.Members = nil
			c.Pools[i] = p
		}
		return json.Marshal(&c)
	}
	ra, err := strip(a)
	if err != nil {
		return false, err
	}
	rb, err := strip(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ra, rb), nil
}

// flushLoop writes pending member changes when PutMembers asks, until
// Close.
func (s *Store) flushLoop() {
	defer s.flushWG.Done()
	for {
		select {
		case <-s.flushDone:
			return
		case <-s.flushWake:
		}
		s.mu.Lock()
		// A failure leaves them pending: the next write tries again, in
		// its own transaction, and fails with the reason.
		_ = s.flushLocked()
		s.mu.Unlock()
	}
}

// flushLocked writes every pending member change. Callers hold s.mu.
func (s *Store) flushLocked() error {
	if len(s.pending) == 0 {
		return nil
	}
	if err := s.writeLocked(func(*bbolt.Tx) error { return nil }); err != nil {
		return fmt.Errorf("write pending member changes: %w", err)
	}
	return nil
}
