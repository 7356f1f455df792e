package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"pier.dev/pier/internal/source"
)

const (
	// settleDelay is the wait after a lone event that may leave a file
	// half written (a write in place, a truncation, a removal or rename
	// that may be the first half of a replacement), the first since the
	// last reload more than debounceDelay ago: any further event within
	// it turns the wait into a burst's. An event that puts a whole file
	// in place (leadingEvent) is read at once instead.
	settleDelay = 10 * time.Millisecond
	// debounceDelay lets a burst of events (an editor's write, rename and
	// chmod; a tool writing many files) settle into one reload.
	debounceDelay = 100 * time.Millisecond
	// debounceMax bounds the wait under a steady stream of events, so an
	// edit is still applied within a second.
	debounceMax = 500 * time.Millisecond
	// pollInterval is the period of the fallback when fsnotify is unusable.
	pollInterval = time.Second
)

// Watch loads the manifests under paths, calls onChange with the snapshot,
// then watches the files and calls onChange with a fresh full snapshot
// whenever their bytes change; only the files that changed are read (see
// Loader). A file touched without change causes no
// call. onChange runs on Watch's goroutine, one call at a time; events
// arriving meanwhile are coalesced into the next reload.
//
// Watch returns an error only if the first load fails (a named path is
// missing or unreadable); a path that disappears later is reported as a
// Problem. It returns nil when ctx is cancelled. It uses fsnotify on the
// folders and on the parent folder of each named path (editors that save
// by renaming a new file into place replace the watched inode), and falls
// back to polling every second if fsnotify cannot be used. A symlinked
// file is re-read when an event occurs in its folder, not when its target
// changes elsewhere.
func Watch(ctx context.Context, paths []string, logger *slog.Logger, onChange func(*source.Snapshot, []Problem)) error {
	return watch(ctx, paths, logger, onChange, false)
}

// watcher serialises file events, debounces them and reloads.
type watcher struct {
	loader   *Loader
	log      *slog.Logger
	onChange func(*source.Snapshot, []Problem)
	roots    []string // absolute named paths

	fs       *fsnotify.Watcher
	timer    *time.Timer
	pending  bool
	first    time.Time // first event of the pending burst
	reloaded time.Time // when the last reload began
}

func watch(ctx context.Context, paths []string, logger *slog.Logger,
	onChange func(*source.Snapshot, []Problem), forcePoll bool) error {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &watcher{loader: NewLoader(paths, logger), log: logger, onChange: onChange}
	snap, problems, _, err := w.loader.Load()
	if err != nil {
		return fmt.Errorf("load manifests: %w", err)
	}
	onChange(snap, problems)
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return fmt.Errorf("manifest path %s: %w", p, err)
		}
		w.roots = append(w.roots, abs)
	}
	if !forcePoll {
		fsw, err := fsnotify.NewWatcher()
		if err == nil {
			defer fsw.Close()
			w.fs = fsw
			return w.run(ctx)
		}
		logger.Warn("cannot watch manifests, polling instead", "error", err, "interval", pollInterval)
	}
	return w.poll(ctx)
}

// run is the fsnotify loop. Any event under a named path schedules a
// rescan rather than being interpreted: the folders are listed again, and
// a file is read again if its stat changed or an event named it (or a
// folder above it); the hash of its bytes then decides whether it
// changed. That handles renames, ConfigMap symlink swaps and new folders
// alike.
func (w *watcher) run(ctx context.Context) error {
	w.timer = time.NewTimer(time.Hour)
	w.timer.Stop()
	defer w.timer.Stop()
	// Adding the watches schedules a rescan, which catches files written
	// between the first load and the watches being in place.
	if !w.syncWatches() {
		return w.poll(ctx)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.fs.Events:
			if !ok {
				return w.poll(ctx)
			}
			if w.relevant(ev.Name) {
				w.log.Debug("manifest event", "file", ev.Name, "op", ev.Op.String())
				w.loader.Reread(ev.Name)
				w.schedule(leadingEvent(ev))
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return w.poll(ctx)
			}
			// An overflow loses events; reading everything recovers from
			// any error.
			w.log.Warn("watching manifests", "error", err)
			w.loader.RereadAll()
			w.schedule(false)
		case <-w.timer.C:
			w.fire()
		}
		if w.fs == nil {
			return w.poll(ctx)
		}
	}
}

// fire ends the pending burst: it reloads and watches the folders the
// load walked. If fsnotify became unusable, w.fs is nil afterwards.
func (w *watcher) fire() {
	w.timer.Stop()
	w.pending, w.reloaded = false, time.Now()
	w.reload()
	if !w.syncWatches() {
		w.fs = nil
	}
}

// schedule counts an event, then reloads at once or (re)arms the debounce
// timer, as wait decides.
func (w *watcher) schedule(leading bool) {
	delay, readNow := w.wait(time.Now(), leading)
	if readNow {
		w.fire()
		return
	}
	w.timer.Reset(delay)
}

// wait counts an event at now and says how long to wait before reading:
// not at all (readNow) for a lone leading event (see leadingEvent) after
// a quiet spell of debounceDelay since the last reload; settleDelay after
// another lone event after a quiet spell; else debounceDelay after the
// last event, but no later than debounceMax after the first of the
// burst. Events right after a reload, the leading one's included, are
// the burst it began: they wait as a burst does.
func (w *watcher) wait(now time.Time, leading bool) (delay time.Duration, readNow bool) {
	quiet := !w.pending && now.Sub(w.reloaded) > debounceDelay
	if !w.pending {
		w.pending, w.first = true, now
	}
	switch {
	case quiet && leading:
		return 0, true
	case quiet:
		return settleDelay, false
	}
	return min(debounceDelay, max(w.first.Add(debounceMax).Sub(now), 0)), false
}

// leadingEvent reports an event after which the file it names is whole,
// so that it can be read without waiting: a manifest file (or the ..data
// link of a mounted ConfigMap) created in place, which an atomic rename
// into the folder does with the complete file. A file created empty and
// then written is read early too, but it can only add objects, and its
// writes are the burst that follows, read once they settle. Writes in
// place, removals and renames away are not leading: a truncated file, or
// an editor's rename of the file aside before writing the new one, would
// remove objects that are only being replaced.
func leadingEvent(ev fsnotify.Event) bool {
	name := filepath.Base(ev.Name)
	return ev.Has(fsnotify.Create) &&
		(name == "..data" || (!strings.HasPrefix(name, ".") && isManifestName(name)))
}

// relevant drops events outside the named paths (the parent folders are
// watched only for the named entries in them) and editor scratch files.
func (w *watcher) relevant(name string) bool {
	if isEditorTemp(filepath.Base(name)) {
		return false
	}
	for _, r := range w.roots {
		if name == r || strings.HasPrefix(name, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// syncWatches watches the folders walked by the last load and the parents
// of the named paths, and forgets folders no longer wanted. fsnotify's own
// list is the truth, as it drops the watch of a folder that was deleted or
// moved, even if one of the same name has taken its place since. When it
// adds a folder it schedules a rescan, as files may have been created in
// it before the watch existed. It returns false if fsnotify is unusable;
// the watcher is then closed and the caller must poll.
func (w *watcher) syncWatches() bool {
	want := map[string]bool{}
	for _, r := range w.roots {
		want[filepath.Dir(r)] = true
	}
	for _, d := range w.loader.dirs {
		want[d] = true
	}
	have := map[string]bool{}
	for _, d := range w.fs.WatchList() {
		have[d] = true
	}
	added := false
	for d := range want {
		if have[d] {
			continue
		}
		err := w.fs.Add(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			w.log.Debug("manifest folder vanished before it could be watched", "dir", d)
			continue
		case err != nil:
			w.log.Warn("cannot watch manifests, polling instead", "dir", d, "error", err,
				"interval", pollInterval)
			w.fs.Close()
			return false
		}
		added = true
	}
	for d := range have {
		if !want[d] {
			_ = w.fs.Remove(d) // fails if the folder is gone, which already removed the watch
		}
	}
	if added {
		w.schedule(false)
	}
	return true
}

func (w *watcher) poll(ctx context.Context) error {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			w.reload()
		}
	}
}

// reload reads the files that changed and calls onChange if their bytes
// did.
func (w *watcher) reload() {
	snap, problems, changed, err := w.loader.Load()
	if err != nil {
		w.log.Warn("manifest path unavailable", "error", err)
	}
	if !changed {
		w.log.Debug("manifests unchanged", "files", len(w.loader.cache), "read", w.loader.reads)
		return
	}
	w.log.Info("manifests changed", "files", len(w.loader.cache), "read", w.loader.reads,
		"ingresses", len(snap.Ingresses),
		"services", len(snap.Services), "endpointSlices", len(snap.EndpointSlices),
		"secrets", len(snap.Secrets), "ingressClasses", len(snap.IngressClasses),
		"nodes", len(snap.Nodes), "problems", len(problems))
	w.onChange(snap, problems)
}
