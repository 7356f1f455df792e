package ipam

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"
	"time"

	"pier.dev/pier/internal/model"
)

// Errors returned by Assign and Replay wrap one of these (errors.Is); their
// messages are written for the user and fit an Event as they are.
var (
	ErrPoolExhausted  = errors.New("address pool exhausted")
	ErrAddressInUse   = errors.New("address in use")
	ErrOutsidePool    = errors.New("address outside the configured pools")
	ErrInvalidAddress = errors.New("invalid IP address")
)

type ipamError struct {
	kind error
	msg  string
}

func (e *ipamError) Error() string { return e.msg }
func (e *ipamError) Unwrap() error { return e.kind }

func errorf(kind error, format string, args ...any) error {
	return &ipamError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// claim is what one LoadBalancer holds.
type claim struct {
	uuid, name string
	vip, fip   netip.Addr // zero Addr: none
}

// freed is an address in quarantine: only the load balancer of the same
// name (the same Ingress or group, even re-created with a new UID) may
// take it before until. An address Reserve found in the state folder is
// kept for the UUID that held it (and its name, when known).
type freed struct {
	name  string
	uuid  string // set by Reserve
	until time.Time
}

// mine reports whether the quarantine keeps the address for lb.
func (q freed) mine(lb *model.LoadBalancer) bool {
	return q.name != "" && q.name == lb.Name || q.uuid != "" && q.uuid == lb.UUID
}

// holder names the load balancer the address is kept for.
func (q freed) holder() string {
	if q.name != "" {
		return q.name
	}
	return q.uuid
}

// Allocator hands out VIPs from the internal pool and FIPs from the public
// pool (or as pinned). It is safe for concurrent use.
type Allocator struct {
	mu       sync.Mutex
	internal Pool
	public   *Pool
	byAddr   map[netip.Addr]*claim
	byUUID   map[string]*claim
	// quarantine is how long a freed address stays reserved for its last
	// holder: without it, a pending pin grabs the address the moment its
	// owner is deleted, and a re-created owner finds its DNS record
	// pointing at someone else.
	quarantine time.Duration
	freed      map[netip.Addr]freed
	now        func() time.Time
}

// HasPublicPool reports whether floating IPs come from a pool (without
// one, only pinned addresses are floating IPs).
func (a *Allocator) HasPublicPool() bool { return a.public != nil }

// New returns an empty Allocator. public may be nil: then only pinned
// floating IPs are granted.
func New(internal Pool, public *Pool) *Allocator {
	a := &Allocator{internal: internal, byAddr: map[netip.Addr]*claim{}, byUUID: map[string]*claim{},
		freed: map[netip.Addr]freed{}, now: time.Now}
	if public != nil {
		p := *public
		a.public = &p
	}
	return a
}

// SetQuarantine sets how long a freed address is kept for the load
// balancer that held it (matched by name); zero frees addresses at once.
func (a *Allocator) SetQuarantine(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.quarantine = d
}

// Reserve keeps addrs, which load balancer uuid (of name, "" if unknown)
// held when pier's database was lost, for it until until: as after a
// deletion, that load balancer gets them back and no other may take
// them. Addresses another load balancer holds are left alone. Call it
// before the first Assign.
func (a *Allocator) Reserve(uuid, name string, addrs []netip.Addr, until time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, addr := range addrs {
		addr = addr.Unmap()
		if a.byAddr[addr] == nil && a.inSomePool(addr) {
			a.freed[addr] = freed{name: name, uuid: uuid, until: until}
		}
	}
}

// Replay claims the VIPs and FIPs that stored LoadBalancers already hold.
// Call it with everything in the store before the first Assign, so that a
// new LoadBalancer cannot take an address whose owner was not seen yet.
// Objects are taken oldest first (CreatedAt, then UUID): when two claim the
// same address the older keeps it and the other is reported; so is an
// address outside the pools (after a pool change). A LoadBalancer whose
// address was not claimed gets a new one from its next Assign.
func (a *Allocator) Replay(lbs []*model.LoadBalancer) []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	var errs []error
	for _, lb := range model.OldestFirst(lbs) {
		if err := a.replayOne(lb, "VIP", lb.VIP); err != nil {
			errs = append(errs, err)
		}
		if err := a.replayOne(lb, "external IP", lb.FIP); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

func (a *Allocator) replayOne(lb *model.LoadBalancer, role, s string) error {
	if s == "" {
		return nil
	}
	addr, err := parseAddr(s)
	if err != nil {
		return errorf(ErrInvalidAddress, "load balancer %s: stored %s %q is not a valid IP address", lb.Name, role, s)
	}
	isVIP := role == "VIP"
	if isVIP && !a.internal.Contains(addr) || !isVIP && !a.inSomePool(addr) {
		return errorf(ErrOutsidePool, "load balancer %s: stored %s %s is outside %s; it will get a new one",
			lb.Name, role, addr, a.poolsFor(isVIP))
	}
	switch o := a.byAddr[addr]; {
	case o == nil:
	case o.uuid != lb.UUID:
		return errorf(ErrAddressInUse, "load balancer %s: stored %s %s is already held by load balancer %s, which is older",
			lb.Name, role, addr, o.name)
	case isVIP && o.fip == addr || !isVIP && o.vip == addr:
		return errorf(ErrAddressInUse, "load balancer %s: stored VIP and external IP are both %s", lb.Name, addr)
	}
	c := a.claimFor(lb)
	if isVIP {
		a.move(c, &c.vip, addr)
	} else {
		a.move(c, &c.fip, addr)
	}
	return nil
}

// Assign sets lb.VIP and lb.FIP. Addresses this UUID holds are kept (they
// never move while the owner lives); otherwise lb.VIP is kept if it is in
// the internal pool and free, else the lowest free internal address is
// taken. lb.RequestedFIP, when set, must lie in a configured pool and not
// be held by another LoadBalancer; changing or dropping it releases the
// old FIP. Without a pin, a FIP comes from the public pool if there is one.
// Assign either succeeds whole or changes nothing, lb included.
func (a *Allocator) Assign(lb *model.LoadBalancer) error {
	if lb == nil || lb.UUID == "" {
		return errors.New("assign: load balancer has no UUID")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.byUUID[lb.UUID]
	// The FIP is chosen first so that a pin inside the internal pool is not
	// taken as this LoadBalancer's own VIP.
	fip, err := a.chooseFIP(lb, c)
	if err != nil {
		return err
	}
	vip, err := a.chooseVIP(lb, c, fip)
	if err != nil {
		return err
	}
	c = a.claimFor(lb)
	a.move(c, &c.vip, vip)
	a.move(c, &c.fip, fip)
	lb.VIP = vip.String()
	lb.FIP = ""
	if fip.IsValid() {
		lb.FIP = fip.String()
	}
	return nil
}

func (a *Allocator) chooseVIP(lb *model.LoadBalancer, c *claim, fip netip.Addr) (netip.Addr, error) {
	if c != nil && c.vip.IsValid() {
		return c.vip, nil
	}
	if addr, ok := a.reclaim(a.internal, lb, fip); ok {
		return addr, nil
	}
	if addr, err := parseAddr(lb.VIP); err == nil && a.internal.Contains(addr) && addr != fip && !a.blocked(addr, lb) {
		return addr, nil
	}
	if addr, ok := a.internal.lowestFree(a.blockedFor(lb), fip); ok {
		return addr, nil
	}
	return netip.Addr{}, errorf(ErrPoolExhausted, "no free VIP for load balancer %s: internal pool %s is exhausted",
		lb.Name, a.internal)
}

func (a *Allocator) chooseFIP(lb *model.LoadBalancer, c *claim) (netip.Addr, error) {
	var held netip.Addr
	if c != nil {
		held = c.fip
	}
	if lb.RequestedFIP == "" {
		if a.public == nil {
			return netip.Addr{}, nil
		}
		if a.public.Contains(held) {
			return held, nil
		}
		if addr, ok := a.reclaim(*a.public, lb, netip.Addr{}); ok {
			return addr, nil
		}
		if addr, ok := a.public.lowestFree(a.blockedFor(lb), netip.Addr{}); ok {
			return addr, nil
		}
		return netip.Addr{}, errorf(ErrPoolExhausted, "no free external IP for load balancer %s: public pool %s is exhausted",
			lb.Name, a.public)
	}
	want, err := parseAddr(lb.RequestedFIP)
	if err != nil {
		return netip.Addr{}, errorf(ErrInvalidAddress, "external IP %q is not a valid IP address", lb.RequestedFIP)
	}
	if want == held {
		return held, nil
	}
	if !a.inSomePool(want) {
		return netip.Addr{}, errorf(ErrOutsidePool, "external IP %s is outside %s", want, a.poolsFor(false))
	}
	if o := a.byAddr[want]; o != nil {
		if o.uuid == lb.UUID {
			return netip.Addr{}, errorf(ErrAddressInUse, "external IP %s is already the VIP of this load balancer", want)
		}
		return netip.Addr{}, errorf(ErrAddressInUse, "external IP %s is already used by load balancer %s", want, o.name)
	}
	if q, ok := a.freed[want]; ok && a.blocked(want, lb) {
		if q.uuid != "" {
			return netip.Addr{}, errorf(ErrAddressInUse,
				"external IP %s was held by load balancer %s when pier's database was lost and stays reserved for it until %s",
				want, q.holder(), q.until.UTC().Format(time.RFC3339))
		}
		return netip.Addr{}, errorf(ErrAddressInUse,
			"external IP %s was freed by load balancer %s and stays reserved for it until %s (--address-quarantine)",
			want, q.name, q.until.UTC().Format(time.RFC3339))
	}
	return want, nil
}

// Release frees what uuid holds, into quarantine. Call it when the
// LoadBalancer is deleted.
func (a *Allocator) Release(uuid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.byUUID[uuid]
	if c == nil {
		return
	}
	a.move(c, &c.vip, netip.Addr{})
	a.move(c, &c.fip, netip.Addr{})
	delete(a.byUUID, uuid)
}

func (a *Allocator) claimFor(lb *model.LoadBalancer) *claim {
	c := a.byUUID[lb.UUID]
	if c == nil {
		c = &claim{uuid: lb.UUID}
		a.byUUID[lb.UUID] = c
	}
	c.name = lb.Name
	return c
}

// move points one of c's slots at addr, keeping byAddr in step. The
// address it leaves goes into quarantine for c's name.
func (a *Allocator) move(c *claim, slot *netip.Addr, addr netip.Addr) {
	if *slot == addr {
		return
	}
	if slot.IsValid() && a.byAddr[*slot] == c {
		delete(a.byAddr, *slot)
		if a.quarantine > 0 {
			a.freed[*slot] = freed{name: c.name, until: a.now().Add(a.quarantine)}
		}
	}
	*slot = addr
	if addr.IsValid() {
		a.byAddr[addr] = c
		delete(a.freed, addr)
	}
}

// blocked reports whether lb may not take addr: another load balancer
// holds it, or it is in quarantine for another.
func (a *Allocator) blocked(addr netip.Addr, lb *model.LoadBalancer) bool {
	if a.byAddr[addr] != nil {
		return true
	}
	q, ok := a.freed[addr]
	if !ok {
		return false
	}
	if !a.now().Before(q.until) {
		delete(a.freed, addr)
		return false
	}
	return !q.mine(lb)
}

func (a *Allocator) blockedFor(lb *model.LoadBalancer) func(netip.Addr) bool {
	return func(addr netip.Addr) bool { return a.blocked(addr, lb) }
}

// reclaim returns the lowest address of pool in quarantine for lb (the
// same Ingress or group, re-created; or the same UUID, see Reserve): its
// owner gets it back.
func (a *Allocator) reclaim(pool Pool, lb *model.LoadBalancer, skip netip.Addr) (netip.Addr, bool) {
	var mine []netip.Addr
	for addr, q := range a.freed {
		if q.mine(lb) && addr != skip && pool.Contains(addr) && !a.blocked(addr, lb) {
			mine = append(mine, addr)
		}
	}
	if len(mine) == 0 {
		return netip.Addr{}, false
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].Less(mine[j]) })
	return mine[0], true
}

func (a *Allocator) inSomePool(addr netip.Addr) bool {
	return a.internal.Contains(addr) || a.public != nil && a.public.Contains(addr)
}

func (a *Allocator) poolsFor(vip bool) string {
	if vip || a.public == nil {
		return "the internal pool " + a.internal.String()
	}
	return fmt.Sprintf("the configured pools (internal %s, public %s)", a.internal, a.public)
}

// parseAddr accepts what netip does, minus zones, and unmaps ::ffff:a.b.c.d
// so the same IPv4 address has one key.
func parseAddr(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, err
	}
	if addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("zone not allowed in %q", s)
	}
	return addr.Unmap(), nil
}
