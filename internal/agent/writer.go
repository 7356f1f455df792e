package agent

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/store"
)

// writeTimeout bounds one status write (one report, or one batch where
// the store batches): a write over a connection that hangs gives up and
// is retried.
const writeTimeout = 2 * time.Second

// statusWriter writes the agent's reports in the background. The agent's
// loop must never wait on the API server: it watches health and moves
// addresses, and an API server that hangs or is cut off would
// otherwise freeze a failed node in FAULT, its HAProxy not restarted.
// Only the newest report per load balancer waits; a failed write is
// retried every second until it succeeds or a newer one replaces it.
type statusWriter struct {
	store   store.Store
	logger  *slog.Logger
	timeout time.Duration // writeTimeout (tests shorten it)

	mu      sync.Mutex
	pending map[string]model.NodeStatus // newest unwritten report per UUID
	failing bool                        // the last write failed (logged once)
	// writtenThrough is when the last pass that left nothing unwritten
	// began: every report queued before it is in the store (or replaced
	// by a newer one that is). The heartbeat carries it to the peers:
	// a peer's report is its current word only up to that time.
	writtenThrough time.Time
	wake           chan struct{}
	// written tells the agent's loop which reports reached the store.
	written chan writtenReport
	// writeMu serialises writes between run and flush.
	writeMu sync.Mutex
}

type writtenReport struct {
	uuid   string
	report model.NodeStatus
}

func newStatusWriter(st store.Store, logger *slog.Logger) *statusWriter {
	return &statusWriter{store: st, logger: logger, timeout: writeTimeout, pending: map[string]model.NodeStatus{},
		wake: make(chan struct{}, 1), written: make(chan writtenReport, 1024)}
}

// put queues r (stamped) as uuid's newest report.
func (w *statusWriter) put(uuid string, r model.NodeStatus) {
	w.mu.Lock()
	w.pending[uuid] = r
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// has reports whether a report of uuid waits to be written.
func (w *statusWriter) has(uuid string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.pending[uuid]
	return ok
}

// forget drops uuid's unwritten report (its load balancer left).
func (w *statusWriter) forget(uuid string) {
	w.mu.Lock()
	delete(w.pending, uuid)
	w.mu.Unlock()
}

// run writes until ctx ends.
func (w *statusWriter) run(ctx context.Context) {
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case <-retry.C:
		}
		w.writeAll(ctx)
	}
}

// flush writes what is pending, within timeout (shutdown).
func (w *statusWriter) flush(timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w.writeAll(ctx)
}

func (w *statusWriter) writeAll(ctx context.Context) {
	w.writeMu.Lock()
	defer w.writeMu.Unlock()
	start := time.Now()
	w.mu.Lock()
	uuids := make([]string, 0, len(w.pending))
	for uuid := range w.pending {
		uuids = append(uuids, uuid)
	}
	w.mu.Unlock()
	sort.Strings(uuids)
	for len(uuids) > 0 && ctx.Err() == nil {
		n := min(batchSize, len(uuids))
		reports := make(map[string]model.NodeStatus, n)
		w.mu.Lock()
		for _, uuid := range uuids[:n] {
			if r, ok := w.pending[uuid]; ok {
				reports[uuid] = r
			}
		}
		w.mu.Unlock()
		uuids = uuids[n:]
		done, missing, err := w.putReports(ctx, reports)
		if !w.wrote(reports, done, missing, err) {
			return // the store is away: try again on the next tick
		}
	}
	if ctx.Err() == nil {
		w.mu.Lock()
		w.writtenThrough = start
		w.mu.Unlock()
	}
}

// writtenAt is the time up to which every report queued is in the store
// (statusWriter.writtenThrough); zero before the first pass.
func (w *statusWriter) writtenAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writtenThrough
}

// batchSize bounds the reports written in one transaction: large enough
// that a shard's cold start (hundreds of reports at once) costs a few
// disk syncs, small enough that one transaction stays short.
const batchSize = 512

// putReports writes reports in one write where the store can
// (store.NodeStatusBatcher), else one by one, stopping at the first
// failure; each write has the writer's timeout. It returns the UUIDs dealt with
// before any failure (all of them without one): written, or in missing
// when the store has no load balancer for them.
//
// One by one, what was written before a failure counts: a store that
// writes over the network (kube, one API request or two per report, at
// the client's rate) takes longer than one timeout for a node's cold
// start of hundreds of reports, and a pass that wrote none of them, as
// far as the next pass knew, started again from the first, read it
// again to find it unchanged, and never reached the later ones.
func (w *statusWriter) putReports(ctx context.Context, reports map[string]model.NodeStatus) (done, missing []string, err error) {
	uuids := make([]string, 0, len(reports))
	for uuid := range reports {
		uuids = append(uuids, uuid)
	}
	sort.Strings(uuids)
	if b, ok := w.store.(store.NodeStatusBatcher); ok {
		wctx, cancel := context.WithTimeout(ctx, w.timeout)
		defer cancel()
		if missing, err = b.PutNodeStatuses(wctx, reports); err != nil {
			return nil, nil, err
		}
		return uuids, missing, nil
	}
	for _, uuid := range uuids {
		wctx, cancel := context.WithTimeout(ctx, w.timeout)
		err := w.store.PutNodeStatus(wctx, uuid, reports[uuid])
		cancel()
		switch {
		case errors.Is(err, store.ErrNotFound):
			// Its load balancer is gone: nothing to report on. Said, since
			// a report dropped here is never written.
			w.logger.Info("status report dropped: the store has no such load balancer", "uuid", uuid)
			missing = append(missing, uuid)
		case err != nil:
			return done, missing, err
		}
		done = append(done, uuid)
	}
	return done, missing, nil
}

// wrote records the outcome of writing reports: the ones done and still
// pending unchanged are no longer pending (missing ones too: their load
// balancer is gone) and the loop hears which reached the store; a failure
// is logged once. It reports whether the whole write succeeded.
func (w *statusWriter) wrote(reports map[string]model.NodeStatus, done, missing []string, err error) bool {
	w.mu.Lock()
	for _, uuid := range done {
		if cur, still := w.pending[uuid]; still && cur.Equal(reports[uuid]) {
			delete(w.pending, uuid)
		}
	}
	wasFailing := w.failing
	w.failing = err != nil
	w.mu.Unlock()
	for _, uuid := range done {
		if slices.Contains(missing, uuid) {
			continue
		}
		select {
		case w.written <- writtenReport{uuid: uuid, report: reports[uuid]}:
		default: // the loop is behind: it only misses a fence, the safe side
		}
	}
	if err != nil {
		if !wasFailing {
			w.logger.Warn("could not report status; retrying every second, the data plane is not affected", "reports", len(reports), "error", err)
		}
		return false
	}
	if wasFailing {
		w.logger.Info("status reports reach the store again")
	}
	return true
}
