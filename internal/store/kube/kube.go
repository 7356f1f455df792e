// Package kube is the store.Store of Kubernetes mode: each LoadBalancer is a
// cluster-scoped custom resource (loadbalancers.pier.dev/v1alpha1, schema in
// deploy/crd-loadbalancers.yaml) named by its UUID. The controller writes
// its spec, agents write its status through the status subresource.
//
// Concurrency is optimistic, on resourceVersion. Writers in one process are
// serialised per UUID, and each write goes on top of the version this store
// last saw (its own last write or a read; kept per UUID), so a conflict
// always means another process wrote since:
//
//   - PutNodeStatus retries on a fresh read: each node's report is its own
//     entry of the status, merged on top of the newest version.
//   - PutSpec retries only if the other write left the spec alone (an agent's
//     status); if the spec changed or the object was deleted, it returns
//     ErrConflict. Two controllers that both believe they lead therefore
//     never both win: the one that wrote second learns it, and calling again
//     (from a fresh read) is a deliberate decision to overwrite.
//
// No ownerReferences are set: the garbage collector ignores a namespaced
// owner (an Ingress) of a cluster-scoped object, so the controller deletes
// LoadBalancers whose sources are gone (test/kubeapi pins that fact).
package kube

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// Resource is the LoadBalancer custom resource.
var Resource = schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"}

const (
	apiVersion = "pier.dev/v1alpha1"
	kind       = "LoadBalancer"
	// listPage bounds one List response: thousands of LoadBalancers with
	// their members would otherwise come back as one huge body.
	listPage = 250
)

// ErrConflict is matched (errors.Is) by PutSpec's error when another writer
// changed the LoadBalancer's spec between PutSpec's read and its write.
var ErrConflict = errors.New("load balancer spec changed concurrently")

// statusBackoff spaces PutStatus retries; agents on two nodes may report
// at the same moment.
var statusBackoff = wait.Backoff{Steps: 8, Duration: 10 * time.Millisecond, Factor: 2, Jitter: 0.5, Cap: time.Second}

// Options configure a Store.
type Options struct {
	// FieldManager names pier's writes in managedFields ("pier" if empty).
	FieldManager string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Node, set by a node's agent, keeps in the write cache every watched
	// object placed on that node: its first report then goes on top of
	// the version the watch delivered, one PUT instead of a GET and a
	// PUT (a cold start of hundreds of load balancers per node paid a
	// read for each). Objects placed elsewhere stay uncached.
	//
	// Node also narrows Watch to the load balancers placed on the node
	// (by their placement labels, labels.go) while every object carries
	// them. List and Get still read every load balancer.
	Node string
}

// Store implements store.Store on the LoadBalancer custom resource.
type Store struct {
	client dynamic.NamespaceableResourceInterface
	opts   Options
	log    *slog.Logger

	// locks serialise this process's writers per UUID (sharded: bounded
	// memory, rare false sharing).
	locks [64]sync.Mutex
	cache objectCache

	mu       sync.Mutex
	closed   bool
	watchers map[*watcher]context.CancelFunc
	wg       sync.WaitGroup

	// beforeWrite, when set by tests, runs between a write's read and its
	// write: the window in which another writer causes a conflict.
	beforeWrite func(uuid string)
}

var _ store.Store = (*Store)(nil)

// writeConcurrency is how many spec writes a controller runs at once
// (store.ConcurrentWriter). The client's rate limit (--kube-api-qps)
// still paces them; this only stops each from waiting for the one before.
const writeConcurrency = 16

// WriteConcurrency implements store.ConcurrentWriter.
func (s *Store) WriteConcurrency() int { return writeConcurrency }

// New returns a Store that talks to the API server in cfg. The CRD must be
// installed; New does not check (Get, List and Watch report it).
func New(cfg *rest.Config, opts Options) (*Store, error) {
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube store: %w", err)
	}
	return NewForClient(client, opts), nil
}

// NewForClient returns a Store on an existing dynamic client.
func NewForClient(client dynamic.Interface, opts Options) *Store {
	if opts.FieldManager == "" {
		opts.FieldManager = "pier"
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Store{
		client:   client.Resource(Resource),
		opts:     opts,
		log:      log.With("store", "kube"),
		watchers: map[*watcher]context.CancelFunc{},
	}
}

// placedHere reports whether u's placement names this store's node
// (Options.Node): as active, standby or one of an ECMP set.
func (s *Store) placedHere(u *unstructured.Unstructured) bool {
	if s.opts.Node == "" {
		return false
	}
	for _, role := range []string{"active", "standby"} {
		if n, _, _ := unstructured.NestedString(u.Object, "spec", "placement", role); n == s.opts.Node {
			return true
		}
	}
	ecmp, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "placement", "ecmp")
	return slices.Contains(ecmp, s.opts.Node)
}

func (s *Store) lock(uuid string) func() {
	h := fnv.New32a()
	h.Write([]byte(uuid))
	m := &s.locks[h.Sum32()%uint32(len(s.locks))]
	m.Lock()
	return m.Unlock
}

// get reads one object; store.ErrNotFound if there is none.
func (s *Store) get(ctx context.Context, uuid string) (*unstructured.Unstructured, error) {
	if uuid == "" {
		return nil, store.ErrNotFound // the API would answer with a List
	}
	u, err := s.client.Get(ctx, uuid, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w (%w)", store.ErrNotFound, err)
	}
	return u, err
}

// read is get that also remembers the object for the next write.
func (s *Store) read(ctx context.Context, uuid string) (*unstructured.Unstructured, error) {
	u, err := s.get(ctx, uuid)
	if err == nil {
		s.cache.put(u)
	}
	return u, err
}

// Get returns the LoadBalancer with the given UUID.
func (s *Store) Get(ctx context.Context, uuid string) (*model.LoadBalancer, error) {
	u, err := s.read(ctx, uuid)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", uuid, err)
	}
	return decode(u)
}

// List returns every LoadBalancer, sorted by UUID. An object that does not
// decode is logged and left out rather than hiding all the others.
func (s *Store) List(ctx context.Context) ([]*model.LoadBalancer, error) {
	items, _, err := s.list(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	lbs := make([]*model.LoadBalancer, 0, len(items))
	for _, u := range items {
		lb, err := decode(u)
		if err != nil {
			s.log.Error("skipping undecodable load balancer", "uuid", u.GetName(), "err", err)
			continue
		}
		lbs = append(lbs, lb)
	}
	return lbs, nil
}

// list reads every object the label selector matches ("": all), a page at
// a time, from one consistent snapshot, sorted by name; it also returns
// the snapshot's resourceVersion.
func (s *Store) list(ctx context.Context, selector string) ([]*unstructured.Unstructured, string, error) {
	var items []*unstructured.Unstructured
	opts := metav1.ListOptions{Limit: listPage, LabelSelector: selector}
	rv := ""
	for {
		page, err := s.client.List(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		if rv == "" {
			rv = page.GetResourceVersion()
		}
		for i := range page.Items {
			items = append(items, &page.Items[i])
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].GetName() < items[j].GetName() })
	return items, rv, nil
}

// Delete removes a LoadBalancer; store.ErrNotFound if there is none.
func (s *Store) Delete(ctx context.Context, uuid string) error {
	if uuid == "" {
		return fmt.Errorf("delete: %w", store.ErrNotFound)
	}
	defer s.lock(uuid)()
	s.cache.forget(uuid)
	err := s.client.Delete(ctx, uuid, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("delete %s: %w (%w)", uuid, store.ErrNotFound, err)
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", uuid, err)
	}
	return nil
}

func (s *Store) hook(uuid string) {
	if s.beforeWrite != nil {
		s.beforeWrite(uuid)
	}
}

func (s *Store) updateOptions() metav1.UpdateOptions {
	// Strict: a model field the CRD lacks fails the write instead of being
	// pruned silently.
	return metav1.UpdateOptions{FieldManager: s.opts.FieldManager, FieldValidation: "Strict"}
}

func (s *Store) createOptions() metav1.CreateOptions {
	return metav1.CreateOptions{FieldManager: s.opts.FieldManager, FieldValidation: "Strict"}
}

// Close ends every watch (their channels close) and waits for them. It is
// safe to call more than once.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, cancel := range s.watchers {
		cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
