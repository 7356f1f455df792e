// Package bolt is the embedded store.Store used by pier run: one bbolt file
// in the state folder holds every LoadBalancer as JSON keyed by UUID.
package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// SchemaVersion is written into every state file so that a future pier can
// migrate, and an older pier refuses a file it does not understand instead
// of misreading it.
const SchemaVersion = "1"

// lockTimeout bounds the wait for the file lock: a second pier on the same
// state dir should fail at once with a clear message, not hang.
const lockTimeout = time.Second

var (
	bucketLBs  = []byte("loadbalancers")
	bucketMeta = []byte("meta")
	keySchema  = []byte("schema")
)

// ErrInUse is matched (errors.Is) by the error Open returns when another
// process holds the state file.
var ErrInUse = errors.New("state dir is in use by another pier")

type inUseError struct{ dir, file string }

func (e *inUseError) Error() string {
	return fmt.Sprintf("state dir %s is in use by another pier (could not lock %s within %s)",
		e.dir, e.file, lockTimeout)
}

func (e *inUseError) Is(target error) bool { return target == ErrInUse }

// Store implements store.Store on a bbolt file.
type Store struct {
	db   *bbolt.DB
	path string

	// mu serialises each write with its notification, and Watch's replay
	// with its registration, so every watcher sees changes in commit order
	// with none missed or doubled.
	mu       sync.Mutex
	closed   bool
	watchers map[*watcher]context.CancelFunc
	wg       sync.WaitGroup

	// pending holds member changes (PutMembers) that watchers have seen
	// and the file does not hold yet, by UUID: the flusher writes them
	// soon after, and every other write writes them first, in its own
	// transaction. Guarded by mu.
	pending map[string][]byte
	// flushWake asks the flusher to write pending; flushDone ends it.
	flushWake chan struct{}
	flushDone chan struct{}
	flushWG   sync.WaitGroup
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the state file at path (creating its folder) and
// takes an exclusive lock on it until Close. A file that is truncated or
// corrupt is refused with an error that matches ErrDamaged.
func Open(path string) (*Store, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state dir: %w", err)
	}
	if err := checkFile(path); err != nil {
		return nil, err
	}
	db, err := openChecked(path, &bbolt.Options{Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, &inUseError{dir: dir, file: filepath.Base(path)}
	}
	if errors.Is(err, ErrDamaged) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("open state file %s: %w", path, err)
	}
	s := &Store{db: db, path: path, watchers: map[*watcher]context.CancelFunc{},
		pending: map[string][]byte{}, flushWake: make(chan struct{}, 1), flushDone: make(chan struct{})}
	s.flushWG.Add(1)
	go s.flushLoop()
	return s, nil
}

func initSchema(tx *bbolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return fmt.Errorf("create meta bucket: %w", err)
	}
	switch v := meta.Get(keySchema); {
	case v == nil:
		if err := meta.Put(keySchema, []byte(SchemaVersion)); err != nil {
			return fmt.Errorf("write schema version: %w", err)
		}
	case string(v) != SchemaVersion:
		return fmt.Errorf("schema version %q is not %q, the one this pier understands", v, SchemaVersion)
	}
	if _, err := tx.CreateBucketIfNotExists(bucketLBs); err != nil {
		return fmt.Errorf("create load balancer bucket: %w", err)
	}
	return nil
}

// Path is the state file's path.
func (s *Store) Path() string { return s.path }

// Get returns a copy of the LoadBalancer with the given UUID.
func (s *Store) Get(ctx context.Context, uuid string) (*model.LoadBalancer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	raw, ok := s.pending[uuid]
	s.mu.Unlock()
	if ok {
		return decode(raw)
	}
	var lb *model.LoadBalancer
	err := s.db.View(func(tx *bbolt.Tx) error {
		raw := tx.Bucket(bucketLBs).Get([]byte(uuid))
		if raw == nil {
			return store.ErrNotFound
		}
		var err error
		lb, err = decode(raw)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", uuid, err)
	}
	return lb, nil
}

// List returns copies of every LoadBalancer, sorted by UUID (bbolt keeps
// keys in byte order).
func (s *Store) List(ctx context.Context) ([]*model.LoadBalancer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// While member changes are pending, the file and pending are read
	// together, so that a flush cannot fall between them.
	s.mu.Lock()
	pending := s.pending
	if len(pending) == 0 {
		pending = nil // not read without s.mu
		s.mu.Unlock()
	} else {
		defer s.mu.Unlock()
	}
	lbs := []*model.LoadBalancer{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketLBs).ForEach(func(k, raw []byte) error {
			if p, ok := pending[string(k)]; ok {
				raw = p
			}
			lb, err := decode(raw)
			if err != nil {
				return err
			}
			lbs = append(lbs, lb)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	return lbs, nil
}

// PutSpec creates lb or replaces all but its Status and CreatedAt. A new
// LoadBalancer keeps lb.CreatedAt if set (translation passes the source's
// creation time, which IPAM uses to settle conflicts), else gets now; an
// empty Status.State becomes PENDING. A write that changes nothing is
// skipped and sends no event, so a resync does not wake every agent.
func (s *Store) PutSpec(ctx context.Context, lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("put spec: load balancer has no UUID")
	}
	return s.update(ctx, "put spec "+lb.UUID, lb.UUID, specChange(lb))
}

// specChange is PutSpec's read-modify-write of lb.
func specChange(lb *model.LoadBalancer) func(old *model.LoadBalancer) (*model.LoadBalancer, error) {
	return func(old *model.LoadBalancer) (*model.LoadBalancer, error) {
		next := *lb // shallow: only marshalled, never handed out
		if old != nil {
			next.Status, next.CreatedAt = old.Status.Summarize(next.Placement), old.CreatedAt
			return &next, nil
		}
		if next.CreatedAt.IsZero() {
			next.CreatedAt = time.Now().UTC().Round(0)
		}
		// Status belongs to agents: a new LoadBalancer is PENDING until
		// one reports.
		next.Status = model.Status{}.Summarize(next.Placement)
		return &next, nil
	}
}

// writeLocked runs write in a bbolt write transaction, after the pending
// member changes, so that what write reads is what watchers saw; once
// the transaction committed nothing is pending. Every write of the store
// goes through it. Callers hold s.mu.
func (s *Store) writeLocked(write func(tx *bbolt.Tx) error) error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLBs)
		for uuid, raw := range s.pending {
			if err := b.Put([]byte(uuid), raw); err != nil {
				return fmt.Errorf("pending members of %s: %w", uuid, err)
			}
		}
		return write(tx)
	})
	if err == nil {
		clear(s.pending)
	}
	return err
}

// PutNodeStatus merges one node's report into an existing LoadBalancer.
func (s *Store) PutNodeStatus(ctx context.Context, uuid string, report model.NodeStatus) error {
	return s.update(ctx, "put status "+uuid, uuid, func(old *model.LoadBalancer) (*model.LoadBalancer, error) {
		if old == nil {
			return nil, store.ErrNotFound
		}
		old.Status = old.Status.WithReport(report, old.Placement)
		return old, nil
	})
}

var _ store.NodeStatusBatcher = (*Store)(nil)

// PutNodeStatuses records the reports in one transaction, so one disk
// sync, whatever their number (store.NodeStatusBatcher).
func (s *Store) PutNodeStatuses(ctx context.Context, reports map[string]model.NodeStatus) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("put statuses: %w", err)
	}
	uuids := make([]string, 0, len(reports))
	for uuid := range reports {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	s.mu.Lock()
	defer s.mu.Unlock()
	var missing []string
	changed := map[string][]byte{}
	err := s.writeLocked(func(tx *bbolt.Tx) error {
		missing, changed = nil, map[string][]byte{} // bbolt may run this again
		b := tx.Bucket(bucketLBs)
		for _, uuid := range uuids {
			oldRaw := b.Get([]byte(uuid))
			if oldRaw == nil {
				missing = append(missing, uuid)
				continue
			}
			lb, err := decode(oldRaw)
			if err != nil {
				return fmt.Errorf("%s: %w", uuid, err)
			}
			lb.Status = lb.Status.WithReport(reports[uuid], lb.Placement)
			raw, err := json.Marshal(lb)
			if err != nil {
				return fmt.Errorf("encode %s: %w", uuid, err)
			}
			if bytes.Equal(raw, oldRaw) {
				continue
			}
			if err := b.Put([]byte(uuid), raw); err != nil {
				return err
			}
			changed[uuid] = raw
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("put statuses: %w", err)
	}
	for _, uuid := range uuids {
		if raw, ok := changed[uuid]; ok {
			s.notify(uuid, store.EventPut, raw)
		}
	}
	return missing, nil
}

// update runs a read-modify-write of one LoadBalancer in a bbolt
// transaction and notifies watchers if the stored bytes changed.
func (s *Store) update(ctx context.Context, what, uuid string,
	change func(old *model.LoadBalancer) (*model.LoadBalancer, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(what, uuid, change)
}

// updateLocked is update for a caller that holds s.mu.
func (s *Store) updateLocked(what, uuid string, change func(old *model.LoadBalancer) (*model.LoadBalancer, error)) error {
	var raw []byte
	err := s.writeLocked(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLBs)
		oldRaw := b.Get([]byte(uuid))
		var old *model.LoadBalancer
		if oldRaw != nil {
			var err error
			if old, err = decode(oldRaw); err != nil {
				return err
			}
		}
		next, err := change(old)
		if err != nil {
			return err
		}
		if raw, err = json.Marshal(next); err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		if bytes.Equal(raw, oldRaw) {
			raw = nil
			return nil
		}
		return b.Put([]byte(uuid), raw)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if raw != nil {
		s.notify(uuid, store.EventPut, raw)
	}
	return nil
}

// Delete removes a LoadBalancer; store.ErrNotFound if there is none.
func (s *Store) Delete(ctx context.Context, uuid string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", uuid, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var last []byte
	err := s.writeLocked(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLBs)
		raw := b.Get([]byte(uuid))
		if raw == nil {
			return store.ErrNotFound
		}
		// bbolt's slices die with the transaction; the event outlives it.
		last = bytes.Clone(raw)
		return b.Delete([]byte(uuid))
	})
	if err != nil {
		return fmt.Errorf("delete %s: %w", uuid, err)
	}
	s.notify(uuid, store.EventDelete, last)
	return nil
}

// Close ends every watch (their channels close), waits for them, and
// releases the file lock. It is safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for _, cancel := range s.watchers {
		cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	close(s.flushDone)
	s.flushWG.Wait()
	s.mu.Lock()
	flushErr := s.flushLocked()
	s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state file %s: %w", s.path, err)
	}
	return flushErr
}

func decode(raw []byte) (*model.LoadBalancer, error) {
	var lb model.LoadBalancer
	if err := json.Unmarshal(raw, &lb); err != nil {
		return nil, fmt.Errorf("decode stored load balancer: %w", err)
	}
	return &lb, nil
}
