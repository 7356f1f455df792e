package files

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"

	"pier.dev/pier/internal/source"
)

// applyWithin is the promise to the user: an edit is applied within a
// second.
const applyWithin = time.Second

type update struct {
	snap     *source.Snapshot
	problems []Problem
}

// startWatch runs watch until the test ends and returns its updates, the
// first being the initial snapshot.
func startWatch(t *testing.T, poll bool, paths ...string) <-chan update {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	updates := make(chan update, 16)
	done := make(chan error, 1)
	go func() {
		done <- watch(ctx, paths, nil, func(s *source.Snapshot, p []Problem) {
			select {
			case updates <- update{s, p}:
			case <-ctx.Done():
			}
		}, poll)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watch returned %v", err)
		}
	})
	select {
	case <-updates:
	case err := <-done:
		t.Fatalf("watch ended before the first snapshot: %v", err)
	case <-time.After(applyWithin):
		t.Fatal("no initial snapshot")
	}
	return updates
}

// await returns the first update whose services are want, failing after
// within.
func await(t *testing.T, updates <-chan update, within time.Duration, want ...string) update {
	t.Helper()
	deadline := time.After(within)
	var last []string
	for {
		select {
		case u := <-updates:
			last = names(u.snap.Services)
			if slices.Equal(last, want) || (len(last) == 0 && len(want) == 0) {
				return u
			}
		case <-deadline:
			t.Fatalf("services not %v within %v; last update: %v", want, within, last)
		}
	}
}

func expectQuiet(t *testing.T, updates <-chan update) {
	t.Helper()
	select {
	case u := <-updates:
		t.Fatalf("unexpected update: services %v, problems %v", names(u.snap.Services), u.problems)
	case <-time.After(debounceMax + 2*debounceDelay):
	}
}

func svcYAML(names ...string) string {
	var docs []string
	for _, n := range names {
		docs = append(docs, "apiVersion: v1\nkind: Service\nmetadata: {name: "+n+"}\n")
	}
	return strings.Join(docs, "---\n")
}

func TestWatch(t *testing.T) {
	tests := []struct {
		name  string
		named func(dir string) string // the path given to watch
		act   func(t *testing.T, dir string)
		want  []string
	}{{
		name: "edit",
		act:  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "s.yaml"), svcYAML("a", "edited")) },
		want: []string{"default/a", "default/edited"},
	}, {
		name: "add",
		act:  func(t *testing.T, dir string) { writeFile(t, filepath.Join(dir, "t.yml"), svcYAML("added")) },
		want: []string{"default/a", "default/added"},
	}, {
		name: "remove",
		act: func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "s.yaml")); err != nil {
				t.Fatal(err)
			}
		},
		want: nil,
	}, {
		name: "atomic rename",
		act:  func(t *testing.T, dir string) { renameInto(t, filepath.Join(dir, "s.yaml"), svcYAML("renamed")) },
		want: []string{"default/renamed"},
	}, {
		name:  "atomic rename of a named file",
		named: func(dir string) string { return filepath.Join(dir, "s.yaml") },
		act:   func(t *testing.T, dir string) { renameInto(t, filepath.Join(dir, "s.yaml"), svcYAML("renamed")) },
		want:  []string{"default/renamed"},
	}, {
		name:  "vim-style save of a named file",
		named: func(dir string) string { return filepath.Join(dir, "s.yaml") },
		act: func(t *testing.T, dir string) {
			s := filepath.Join(dir, "s.yaml")
			if err := os.Rename(s, s+"~"); err != nil {
				t.Fatal(err)
			}
			writeFile(t, s, svcYAML("saved"))
			if err := os.Remove(s + "~"); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"default/saved"},
	}, {
		name: "new subfolder",
		act: func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "new/deeper/n.yaml"), svcYAML("nested"))
		},
		want: []string{"default/a", "default/nested"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "s.yaml"), svcYAML("a"))
			named := dir
			if tt.named != nil {
				named = tt.named(dir)
			}
			updates := startWatch(t, false, named)
			tt.act(t, dir)
			await(t, updates, applyWithin, tt.want...)
		})
	}
}

// renameInto replaces path the way sed -i and many editors do.
func renameInto(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWatchSubfolderLater(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	updates := startWatch(t, false, dir)
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	expectQuiet(t, updates) // an empty folder changes nothing
	writeFile(t, filepath.Join(dir, "sub/later.yaml"), svcYAML("later"))
	await(t, updates, applyWithin, "default/later")
}

func TestWatchNoChange(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := filepath.Join(dir, "s.yaml")
	writeFile(t, s, svcYAML("a"))
	updates := startWatch(t, false, dir)
	now := time.Now()
	if err := os.Chtimes(s, now, now); err != nil {
		t.Fatal(err)
	}
	writeFile(t, s, svcYAML("a"))                        // same bytes
	writeFile(t, filepath.Join(dir, ".s.yaml.swp"), "x") // editor noise
	writeFile(t, filepath.Join(dir, "notes.txt"), "x")   // not a manifest
	expectQuiet(t, updates)
}

func TestWatchProblemsAndRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := filepath.Join(dir, "s.yaml")
	writeFile(t, s, svcYAML("a"))
	updates := startWatch(t, false, s)

	writeFile(t, s, svcYAML("a")+"---\nkind: [\n")
	u := await(t, updates, applyWithin, "default/a")
	if len(u.problems) != 1 || u.problems[0].Doc != 2 {
		t.Errorf("problems = %v, want one for doc 2", u.problems)
	}
	if err := os.Remove(s); err != nil {
		t.Fatal(err)
	}
	u = await(t, updates, applyWithin)
	if len(u.problems) != 1 || u.problems[0].File != s {
		t.Errorf("a vanished named file must be a problem: %v", u.problems)
	}
	writeFile(t, s, svcYAML("back"))
	if u = await(t, updates, applyWithin, "default/back"); len(u.problems) != 0 {
		t.Errorf("problems after recovery: %v", u.problems)
	}
}

func TestWatchPolling(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "s.yaml"), svcYAML("a"))
	updates := startWatch(t, true, dir)
	writeFile(t, filepath.Join(dir, "sub/p.yaml"), svcYAML("polled"))
	await(t, updates, pollInterval+applyWithin, "default/a", "default/polled")
}

func TestWatchMissingPath(t *testing.T) {
	err := Watch(context.Background(), []string{filepath.Join(t.TempDir(), "nope")}, nil,
		func(*source.Snapshot, []Problem) { t.Error("onChange called") })
	if err == nil {
		t.Fatal("Watch on a missing path succeeded")
	}
}

func TestWatchFolderReplaced(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "manifests")
	writeFile(t, filepath.Join(root, "sub/s.yaml"), svcYAML("a"))
	updates := startWatch(t, false, root)

	// As a git checkout or `rm -rf && cp -r` does: the watched folders go
	// and others of the same names take their place within one burst.
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "sub/s.yaml"), svcYAML("b"))
	await(t, updates, applyWithin, "default/b")
	// The new folders must be watched too.
	writeFile(t, filepath.Join(root, "sub/s.yaml"), svcYAML("c"))
	await(t, updates, applyWithin, "default/c")
}

func TestWatchConfigMapSwap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// The layout the kubelet gives a mounted ConfigMap: visible names are
	// links through ..data, which is swapped atomically on update.
	writeFile(t, filepath.Join(dir, "..v1/s.yaml"), svcYAML("a"))
	for link, target := range map[string]string{"..data": "..v1", "s.yaml": "..data/s.yaml"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	updates := startWatch(t, false, dir)
	writeFile(t, filepath.Join(dir, "..v2/s.yaml"), svcYAML("b"))
	if err := os.Symlink("..v2", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	await(t, updates, applyWithin, "default/b")
}

func TestLeadingEvent(t *testing.T) {
	tests := []struct {
		name string
		op   fsnotify.Op
		want bool
	}{
		{"/m/s.yaml", fsnotify.Create, true}, // an atomic rename's target, or a new file
		{"/m/s.json", fsnotify.Create, true},
		{"/m/..data", fsnotify.Create, true}, // a mounted ConfigMap's swap
		{"/m/s.yaml", fsnotify.Write, false}, // may be half written, or truncated
		{"/m/s.yaml", fsnotify.Remove, false},
		{"/m/s.yaml", fsnotify.Rename, false}, // may be an editor's first half of a save
		{"/m/s.yaml", fsnotify.Chmod, false},
		{"/m/.s.yaml", fsnotify.Create, false}, // a tool's hidden temporary file
		{"/m/notes.txt", fsnotify.Create, false},
		{"/m/sub", fsnotify.Create, false},
	}
	for _, tt := range tests {
		if got := leadingEvent(fsnotify.Event{Name: tt.name, Op: tt.op}); got != tt.want {
			t.Errorf("leadingEvent(%s %s) = %v, want %v", tt.op, tt.name, got, tt.want)
		}
	}
}

// TestWatchWait walks the debounce through its cases: a leading event
// after a quiet spell is read at once, another lone event settles, and
// what follows a reload is a burst, bounded by debounceMax.
func TestWatchWait(t *testing.T) {
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	w := &watcher{reloaded: t0.Add(-time.Hour)}
	check := func(step string, now time.Time, leading bool, wantDelay time.Duration, wantNow bool) {
		t.Helper()
		delay, readNow := w.wait(now, leading)
		if readNow != wantNow || (!readNow && delay != wantDelay) {
			t.Errorf("%s: wait = %v, read now %v; want %v, read now %v", step, delay, readNow, wantDelay, wantNow)
		}
	}
	fired := func(now time.Time) { w.pending, w.reloaded = false, now }

	check("rename into place after a quiet spell", t0, true, 0, true)
	fired(t0)
	check("a write right after the leading read", at(time.Millisecond), false, debounceDelay, false)
	check("more of that burst", at(50*time.Millisecond), true, debounceDelay, false)
	fired(at(150 * time.Millisecond))

	check("a write in place after a quiet spell", at(time.Second), false, settleDelay, false)
	check("another event within the settle", at(time.Second+5*time.Millisecond), true, debounceDelay, false)
	fired(at(time.Second + 105*time.Millisecond))

	check("a create too soon after a reload", at(time.Second+150*time.Millisecond), true, debounceDelay, false)
	check("a steady stream near debounceMax", at(time.Second+150*time.Millisecond+debounceMax-time.Millisecond),
		false, time.Millisecond, false)
	check("a steady stream past debounceMax", at(time.Second+150*time.Millisecond+debounceMax), false, 0, false)
}
