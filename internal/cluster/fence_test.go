package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newTestFence(leaseDuration time.Duration) (*writeFence, *fakeClock) {
	clock := &fakeClock{t: time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)}
	f := newWriteFence(leaseDuration, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.now = clock.now
	return f, clock
}

// isOpen asks the fence as a write would, without waiting.
func isOpen(f *writeFence) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok, _ := f.open()
	return ok
}

// wantOpen fails the test with msg unless the fence is open as want.
func wantOpen(t *testing.T, f *writeFence, want bool, msg string) {
	t.Helper()
	if isOpen(f) != want {
		t.Fatal(msg)
	}
}

// tick is one tick of watch.
func tick(f *writeFence) {
	f.mu.Lock()
	f.see()
	f.mu.Unlock()
}

// renew is one successful renewal taking d.
func renew(f *writeFence, clock *fakeClock, d time.Duration) {
	start := f.renewalStarted()
	clock.advance(d)
	f.renewed(start)
}

func TestWriteFenceOpensOnRenewalAndExpires(t *testing.T) {
	f, clock := newTestFence(4 * time.Second)
	tick(f)
	wantOpen(t, f, false, "open before any renewal")
	renew(f, clock, 10*time.Millisecond)
	wantOpen(t, f, true, "closed after a renewal")
	// Ticks every 50 ms keep it seen; 3.9 s after the renewal started it
	// is still open, at the lease duration it closes.
	for clock.now().Sub(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)) < 3900*time.Millisecond {
		clock.advance(pauseTick)
		tick(f)
	}
	wantOpen(t, f, true, "closed 3.9 s after a renewal, lease duration 4 s")
	for range 3 {
		clock.advance(pauseTick)
		tick(f)
	}
	wantOpen(t, f, false, "open 4 s after the last renewal started: the lease may have expired")
	renew(f, clock, 10*time.Millisecond)
	wantOpen(t, f, true, "closed after a fresh renewal")
}

func TestWriteFenceClosesAfterPause(t *testing.T) {
	f, clock := newTestFence(15 * time.Second)
	tick(f)
	renew(f, clock, 10*time.Millisecond)
	wantOpen(t, f, true, "closed after a renewal")
	// A gap of pauseGap is no pause; more is, even though the lease is
	// far from expired: a successor may have taken a deleted Lease.
	clock.advance(pauseGap)
	wantOpen(t, f, true, "a gap of exactly pauseGap closed the fence")
	clock.advance(pauseGap + time.Millisecond)
	wantOpen(t, f, false, "open right after a pause of 251 ms")
	clock.advance(pauseTick)
	tick(f)
	wantOpen(t, f, false, "open after a pause, with no renewal since")
	renew(f, clock, 10*time.Millisecond)
	wantOpen(t, f, true, "closed after a renewal that started after the pause")
}

// A renewal sent before a pause and answered after it may describe the
// lease as it was before: it does not open the fence.
func TestWriteFenceIgnoresRenewalAcrossPause(t *testing.T) {
	f, clock := newTestFence(15 * time.Second)
	tick(f)
	renew(f, clock, 10*time.Millisecond)
	start := f.renewalStarted()
	clock.advance(2 * time.Second) // paused while the renewal was on its way
	f.renewed(start)
	wantOpen(t, f, false, "a renewal that spanned a pause opened the fence")
	renew(f, clock, 10*time.Millisecond)
	wantOpen(t, f, true, "the next renewal did not open the fence")
}

func TestWriteFenceWaitEndsOnRenewalOrLoss(t *testing.T) {
	f, clock := newTestFence(15 * time.Second)
	tick(f)
	done := make(chan error, 1)
	go func() { done <- f.wait(t.Context()) }()
	select {
	case err := <-done:
		t.Fatalf("wait returned %v before any renewal", err)
	case <-time.After(50 * time.Millisecond):
	}
	renew(f, clock, 10*time.Millisecond)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait after a renewal: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait still blocked after a renewal")
	}

	clock.advance(time.Second) // a pause closes it again
	go func() { done <- f.wait(t.Context()) }()
	select {
	case err := <-done:
		t.Fatalf("wait returned %v after a pause", err)
	case <-time.After(50 * time.Millisecond):
	}
	f.lose()
	select {
	case err := <-done:
		if !errors.Is(err, errLeadershipLost) {
			t.Fatalf("wait after loss: %v, want errLeadershipLost", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("wait still blocked after leadership was lost")
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.wait(ctx); !errors.Is(err, errLeadershipLost) {
		t.Fatalf("wait once lost: %v", err)
	}
}

// The transport holds writes at the fence and lets reads through.
func TestWriteFenceTransport(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method)
		mu.Unlock()
	}))
	defer srv.Close()
	f, clock := newTestFence(15 * time.Second)
	tick(f)
	client := &http.Client{Transport: f.transport(http.DefaultTransport)}

	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("a read while closed: %v", err)
	}
	resp.Body.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, strings.NewReader("{}"))
	if _, err := client.Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a write while closed: %v, want it held until its deadline", err)
	}

	renew(f, clock, 10*time.Millisecond)
	for _, method := range []string{http.MethodPut, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		req, _ := http.NewRequestWithContext(t.Context(), method, srv.URL, strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s while open: %v", method, err)
		}
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, ","); got != "GET,PUT,POST,PATCH,DELETE" {
		t.Fatalf("the server saw %s, want GET,PUT,POST,PATCH,DELETE (the held PUT never sent)", got)
	}
}

// fakeLock succeeds or fails every write, as told.
type fakeLock struct {
	resourcelock.Interface
	fail bool
}

func (l *fakeLock) Create(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *fakeLock) Update(context.Context, resourcelock.LeaderElectionRecord) error { return l.err() }
func (l *fakeLock) Identity() string                                                { return "ctl-1" }
func (l *fakeLock) err() error {
	if l.fail {
		return errors.New("conflict")
	}
	return nil
}

// Only a successful write of the lease holding it counts as a renewal: a
// failed one does not, nor the release (no holder) on shutdown.
func TestFencedLockCountsRenewals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fail   bool
		holder string
		create bool
		want   bool
	}{
		{name: "renewal", holder: "ctl-1", want: true},
		{name: "acquired by create", holder: "ctl-1", create: true, want: true},
		{name: "failed renewal", holder: "ctl-1", fail: true},
		{name: "release", holder: ""},
		{name: "another holder", holder: "ctl-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := newTestFence(15 * time.Second)
			lock := fencedLock{Interface: &fakeLock{fail: tc.fail}, fence: f}
			r := resourcelock.LeaderElectionRecord{HolderIdentity: tc.holder}
			if tc.create {
				_ = lock.Create(t.Context(), r)
			} else {
				_ = lock.Update(t.Context(), r)
			}
			if got := isOpen(f); got != tc.want {
				t.Fatalf("open = %v, want %v", got, tc.want)
			}
		})
	}
}
