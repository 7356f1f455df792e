package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// writeFence lets the leader write only while its lease is known to be
// its own. client-go's elector notices a lost lease only when a renewal
// fails, up to RenewDeadline later; meanwhile a leader that was paused
// (SIGSTOP, a frozen VM, a stalled node) acts on informers that are
// seconds old, and its successor may already be writing: a deleted
// Lease is taken at once, without waiting for it to expire. Resumed, the
// old leader would delete what its successor made and rewrite status
// until its renewal failed.
//
// So every write of the controller's clients passes the fence (see
// transport), and the fence is open only when
//   - a renewal of the lease succeeded, and it started less than
//     LeaseDuration ago (before then no other replica may take an
//     expired lease), and
//   - no pause of this process was noticed since that renewal started.
//
// A pause is a gap of more than pauseGap between two moments this
// process was seen running: the ticks of watch, and every call of the
// fence itself, so a write made right after a resume notices the pause
// before the ticker runs. A renewal that started before a pause does not
// count: its answer may describe the lease as it was before the pause.
// A write waits while the fence is closed, until a renewal opens it or
// leadership is lost; a false alarm (a process starved of CPU) costs a
// write at most one RetryPeriod. What is left is a Lease deleted while
// this replica runs: writes stop at its next renewal, at most one
// RetryPeriod later.
type writeFence struct {
	leaseDuration time.Duration
	logger        *slog.Logger
	now           func() time.Time // time.Now, but for tests

	mu sync.Mutex
	// renewedAt is when the last counted renewal started; zero: none yet.
	renewedAt time.Time
	// seenAt is the last moment this process was seen running; pausedAt
	// when the latest pause was noticed (zero: never).
	seenAt, pausedAt time.Time
	lost             bool
	// changed is closed, and replaced, when a renewal counts or
	// leadership is lost: what a waiting write waits for.
	changed chan struct{}
	// closedLogged: the fence's closing was logged, its opening is due.
	closedLogged bool
}

const (
	// pauseGap is the longest time the process may go unseen before the
	// fence treats it as paused. The ticker sees it every pauseTick, so
	// only a stop of the whole process (or a machine starved of CPU for a
	// quarter of a second) passes it. A successor cannot take the lease,
	// see a new object and write it within a pause this short.
	pauseGap  = 250 * time.Millisecond
	pauseTick = 50 * time.Millisecond
)

var errLeadershipLost = errors.New("leadership lost: this replica no longer writes")

func newWriteFence(leaseDuration time.Duration, logger *slog.Logger) *writeFence {
	return &writeFence{leaseDuration: leaseDuration, logger: logger, now: time.Now, changed: make(chan struct{})}
}

// watch marks the process as running every pauseTick until ctx ends.
func (f *writeFence) watch(ctx context.Context) {
	t := time.NewTicker(pauseTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f.mu.Lock()
			f.see()
			f.mu.Unlock()
		}
	}
}

// see records that the process runs now, noting a pause when it was
// unseen for longer than pauseGap, and returns now. f.mu is held.
func (f *writeFence) see() time.Time {
	now := f.now()
	if !f.seenAt.IsZero() && now.Sub(f.seenAt) > pauseGap {
		f.pausedAt = now
		if !f.renewedAt.IsZero() && !f.lost { // a replica that leads
			f.logger.Warn("this process was paused: the controller writes nothing until its lease is renewed",
				"paused_for", now.Sub(f.seenAt).Round(time.Millisecond))
		}
	}
	f.seenAt = now
	return now
}

// renewalStarted is called before a renewal is sent; the time it
// returns goes to renewed once the renewal succeeded.
func (f *writeFence) renewalStarted() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.see()
}

// renewed counts a successful renewal that started at start, unless a
// pause was noticed since it started.
func (f *writeFence) renewed(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.see()
	if start.Before(f.pausedAt) || !start.After(f.renewedAt) {
		return
	}
	f.renewedAt = start
	f.wake()
}

// lose closes the fence for good: leadership is lost.
func (f *writeFence) lose() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.lost {
		f.lost = true
		f.wake()
	}
}

// wake tells waiting writes to look again. f.mu is held.
func (f *writeFence) wake() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// open says whether a write may go now, and why not. f.mu is held.
func (f *writeFence) open() (bool, string) {
	now := f.see()
	switch {
	case f.renewedAt.IsZero():
		return false, "the lease was never renewed"
	case f.renewedAt.Before(f.pausedAt):
		return false, "this process was paused since the lease was last renewed"
	case now.Sub(f.renewedAt) >= f.leaseDuration:
		return false, "the last renewal of the lease is older than the lease duration"
	}
	return true, ""
}

// wait returns nil once a write may go, or an error when leadership is
// lost or ctx ends first.
func (f *writeFence) wait(ctx context.Context) error {
	for {
		f.mu.Lock()
		if f.lost {
			f.mu.Unlock()
			return errLeadershipLost
		}
		ok, why := f.open()
		if ok && f.closedLogged {
			f.closedLogged = false
			f.logger.Info("lease renewed: the controller writes again")
		}
		if !ok && !f.closedLogged {
			f.closedLogged = true
			f.logger.Warn("writes wait for the next renewal of the lease", "reason", why)
		}
		changed := f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// transport makes every request but a read wait for the fence. Reads
// (informers, lists, watches) go at once: they change nothing.
func (f *writeFence) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if err := f.wait(req.Context()); err != nil {
				return nil, err
			}
		}
		return next.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// fencedLock tells the fence about every successful renewal of the lease
// (Create when taking it, Update when renewing). A release (an Update
// with no holder) is no renewal.
type fencedLock struct {
	resourcelock.Interface
	fence *writeFence
}

func (l fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.held(r, func() error { return l.Interface.Create(ctx, r) })
}

func (l fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.held(r, func() error { return l.Interface.Update(ctx, r) })
}

func (l fencedLock) held(r resourcelock.LeaderElectionRecord, write func() error) error {
	start := l.fence.renewalStarted()
	err := write()
	if err == nil && r.HolderIdentity == l.Identity() {
		l.fence.renewed(start)
	}
	return err
}
