// Package routerid allocates VRRP virtual router ids to ordered node
// pairs (active, standby). VRRP ids are 1–255 per L2 segment, so pier runs
// one VRRP instance per ordered pair, carrying the addresses of every load
// balancer placed on it, rather than one per load balancer. The reversed
// pair is another instance: the priorities (vrrp.PriorityActive, PriorityStandby) are
// the other way round.
//
// As ipam (metallb's rule), the allocator is a cache of what the store
// records: Replay the stored load balancers before any Assign, so a
// restart never renumbers a live pair. A renumbered instance is a new
// instance to keepalived: both nodes would drop the old one's addresses.
package routerid

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"pier.dev/pier/internal/model"
)

// Errors wrapped by Assign and Replay (errors.Is).
var (
	ErrExhausted  = errors.New("VRRP router ids exhausted")
	ErrOutOfRange = errors.New("VRRP router id outside the configured range")
	ErrConflict   = errors.New("VRRP router id conflict")
)

// Range is the ids pier may use, bounds included. Two pier installations
// on one segment split 1–255 between them.
type Range struct{ First, Last int }

// DefaultRange is every id VRRP allows.
var DefaultRange = Range{First: 1, Last: 255}

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Contains reports whether id lies in r.
func (r Range) Contains(id int) bool { return id >= r.First && id <= r.Last }

// ParseRange parses "FIRST-LAST" (or one id, "N") given by the option
// named flag, which errors name.
func ParseRange(flag, s string) (Range, error) {
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		last = first
	}
	a, errA := parseID(first)
	b, errB := parseID(last)
	if err := cmp.Or(errA, errB); err != nil {
		return Range{}, fmt.Errorf("%s %q: %w", flag, s, err)
	}
	if a > b {
		return Range{}, fmt.Errorf("%s %q: first id %d is above last id %d", flag, s, a, b)
	}
	return Range{First: a, Last: b}, nil
}

// parseID accepts decimal digits only (no sign, no spaces) in 1–255: 0 is
// not a VRRP router id (RFC 5798 §5.2.3).
func parseID(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" || len(s) > 3 {
		return 0, fmt.Errorf("%q is not a router id: want a number from 1 to 255, as in 1-255", s)
	}
	n, _ := strconv.Atoi(s) // digits only, at most 3: cannot fail
	if n < 1 || n > 255 {
		return 0, fmt.Errorf("router id %d is outside 1-255", n)
	}
	return n, nil
}

// Pair is an ordered pair of nodes.
type Pair struct{ Active, Standby string }

func (p Pair) String() string { return p.Active + "/" + p.Standby }

// PairOf is the pair of a placement; ok is false when it has no standby
// (no VRRP: one node holds the addresses alone).
func PairOf(p model.Placement) (Pair, bool) {
	if p.Active == "" || p.Standby == "" || p.Active == p.Standby {
		return Pair{}, false
	}
	return Pair{Active: p.Active, Standby: p.Standby}, true
}

// Allocator hands out router ids to pairs and counts the load balancers
// on each pair, so an id is freed with the pair's last user. It is safe
// for concurrent use.
type Allocator struct {
	mu     sync.Mutex
	r      Range
	byPair map[Pair]int
	byID   map[int]Pair
	users  map[Pair]map[string]bool
	pairOf map[string]Pair // load balancer UUID → the pair it holds
}

// New returns an empty Allocator over r.
func New(r Range) *Allocator {
	return &Allocator{r: r, byPair: map[Pair]int{}, byID: map[int]Pair{},
		users: map[Pair]map[string]bool{}, pairOf: map[string]Pair{}}
}

// Replay claims the ids stored load balancers carry. Objects are taken
// oldest first (CreatedAt, then UUID): when two pairs carry the same id,
// or one pair two ids, the older keeps its id and the other is reported;
// so is an id outside the range. A load balancer whose id was not claimed
// gets one from its next Assign. A placement without a RouterID (stored
// before pier assigned them) is not an error.
func (a *Allocator) Replay(lbs []*model.LoadBalancer) []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, lb := range model.OldestFirst(lbs) {
		if err := a.replayOne(lb); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (a *Allocator) replayOne(lb *model.LoadBalancer) error {
	pair, ok := PairOf(lb.Placement)
	id := lb.Placement.RouterID
	if !ok || id == 0 {
		return nil
	}
	if !a.r.Contains(id) {
		return fmt.Errorf("load balancer %s: stored router id %d is outside %s; nodes %s get a new one: %w",
			lb.Name, id, a.r, pair, ErrOutOfRange)
	}
	if held, ok := a.byPair[pair]; ok && held != id {
		return fmt.Errorf("load balancer %s: stored router id %d, but nodes %s already have %d; it takes %d: %w",
			lb.Name, id, pair, held, held, ErrConflict)
	}
	if other, ok := a.byID[id]; ok && other != pair {
		return fmt.Errorf("load balancer %s: stored router id %d is already nodes %s's; nodes %s get a new one: %w",
			lb.Name, id, other, pair, ErrConflict)
	}
	a.claim(lb.UUID, pair, id)
	return nil
}

// Assign returns the router id of the placement's pair for load balancer
// uuid, and records uuid as a user of the pair (leaving its previous pair,
// whose id is freed with its last user). A pair that has an id keeps it;
// a new pair takes want if it is in the range and free (the id the load
// balancer carries, so an id lost from the allocator is found again), else
// the lowest free id. A placement without a standby needs no VRRP: 0.
// Assign either succeeds whole or changes nothing.
func (a *Allocator) Assign(uuid, name string, p model.Placement) (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pair, ok := PairOf(p)
	if !ok {
		a.leave(uuid)
		return 0, nil
	}
	id, held := a.byPair[pair]
	if !held {
		var free bool
		if id, free = a.choose(p.RouterID); !free {
			return 0, fmt.Errorf("no VRRP router id for load balancer %s on nodes %s: all %d ids of %s are in use by other node pairs: %w",
				name, pair, a.r.Last-a.r.First+1, a.r, ErrExhausted)
		}
	}
	a.leave(uuid)
	a.claim(uuid, pair, id)
	return id, nil
}

// choose picks want if usable, else the lowest free id.
func (a *Allocator) choose(want int) (int, bool) {
	if _, taken := a.byID[want]; a.r.Contains(want) && !taken {
		return want, true
	}
	for id := a.r.First; id <= a.r.Last; id++ {
		if _, taken := a.byID[id]; !taken {
			return id, true
		}
	}
	return 0, false
}

// Release forgets load balancer uuid. Call it when it is deleted.
func (a *Allocator) Release(uuid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.leave(uuid)
}

func (a *Allocator) claim(uuid string, pair Pair, id int) {
	a.byPair[pair], a.byID[id] = id, pair
	if a.users[pair] == nil {
		a.users[pair] = map[string]bool{}
	}
	a.users[pair][uuid] = true
	a.pairOf[uuid] = pair
}

// leave removes uuid from its pair, freeing the pair's id with its last
// user.
func (a *Allocator) leave(uuid string) {
	pair, ok := a.pairOf[uuid]
	if !ok {
		return
	}
	delete(a.pairOf, uuid)
	delete(a.users[pair], uuid)
	if len(a.users[pair]) > 0 {
		return
	}
	delete(a.users, pair)
	delete(a.byID, a.byPair[pair])
	delete(a.byPair, pair)
}
