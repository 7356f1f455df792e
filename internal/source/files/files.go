// Package files is the source behind `pier run -f PATH`: it reads
// Kubernetes manifests (multi-document YAML or JSON) from files and
// folders, decodes them strictly with the Kubernetes API types, applies the
// apiserver defaults pier depends on, and watches the files so that an
// edit is applied within a second.
//
// A bad document is reported as a Problem and skipped; it never hides the
// other documents. Only a named path that does not exist or cannot be read
// is an error, and only when loading for the first time.
//
// Decisions a reader of the manifests should know:
//   - Kinds kept: networking.k8s.io/v1 Ingress and IngressClass, v1 Service,
//     discovery.k8s.io/v1 EndpointSlice, v1 Secret, v1 ConfigMap (only those
//     an Ingress names in custom-headers reach the snapshot; a YAML
//     document of one over 256 KiB is skipped unread) and v1 Node.
//     v1 List and the typed lists of those kinds are expanded. Kinds of other API
//     groups, and other kinds of these groups (Deployment, Pod, …), are
//     ignored with a debug log. Another version of a kept kind
//     (networking.k8s.io/v1beta1 Ingress) or a misspelt kind in a kept group
//     version is a Problem, because the user clearly meant pier to read it.
//   - Secrets: kept when their type is kubernetes.io/tls, or Opaque (or
//     unset) with both tls.crt and tls.key, or Opaque and named by an
//     Ingress's auth-secret (basic auth users); every other Secret is
//     ignored. stringData is merged into data as
//     the apiserver does. A kubernetes.io/tls Secret without both keys is a
//     Problem, as the apiserver would refuse it.
//   - Nodes: each becomes a source.Node named like it, Ready (a Node in a
//     file is the operator's statement that it runs; its status is
//     ignored, as no kubelet writes it) and Draining when
//     spec.unschedulable is set. Its fields are still decoded strictly.
//   - Defaults as the apiserver sets them: namespace "default" (cleared on
//     the cluster-scoped IngressClass and Node), Service type ClusterIP, port
//     protocol TCP and targetPort = port, EndpointSlice port protocol TCP.
//     EndpointSlice conditions.ready is left nil: the API defines nil as
//     ready, and consumers must read it that way.
//   - No UID is invented (translation derives UUIDs from namespace/name).
//     A missing creationTimestamp is set to the file's modification time,
//     so "oldest wins" rules hold across restarts; within one process an
//     object keeps the timestamp it was first given while it exists, as an
//     update through the apiserver would.
//   - The same kind/namespace/name twice: the first by (file path, document)
//     wins; the other is a Problem. Files are read in lexical path order.
//   - Snapshot slices are sorted by namespace/name, whatever the file
//     layout.
package files

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"pier.dev/pier/internal/annotation"
	"pier.dev/pier/internal/source"
)

// MaxFileSize is the largest manifest file read. Manifests are written by
// people; a bigger file is almost certainly a mistake (a log, an image),
// and refusing it keeps a stray file from costing memory on every reload.
const MaxFileSize = 8 << 20

// Problem is a document (or file) that could not be used. The others are
// unaffected.
type Problem struct {
	File string
	// Doc is the 1-based position of the document among the non-empty
	// documents of File; 0 when the problem is about the whole file.
	Doc int
	// Line is the 1-based line where the document starts; 0 if unknown.
	Line    int
	Message string
}

// String formats the problem for a log line or a terminal.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Doc > 0 {
		fmt.Fprintf(&b, " doc %d", p.Doc)
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	return b.String() + ": " + p.Message
}

// Load reads the manifests under paths once. The error is non-nil only if
// a named path does not exist or cannot be read.
func Load(paths []string) (*source.Snapshot, []Problem, error) {
	snap, problems, _, err := NewLoader(paths, nil).Load()
	if err != nil {
		return nil, nil, err
	}
	return snap, problems, nil
}

// Loader reads manifests again and again. A file is read again only when
// its identity (one stat: inode, size, mtime, ctime) changed, when it was
// modified too recently for its stat to prove anything (racyWindow), when
// it could not be read last time, or when the caller names it (Reread);
// and it is decoded again only when its bytes changed. The snapshot is
// assembled from what each file gave. It is not safe for concurrent use.
type Loader struct {
	paths []string
	log   *slog.Logger
	// racy is racyWindow; the equality tests shorten it.
	racy time.Duration

	cache    map[string]*fileEntry
	winners  map[objectKey]origin // the objects of the last snapshot
	loaded   bool
	scanned  []Problem // the scan's problems of the last Load
	last     *source.Snapshot
	problems []Problem
	dirs     []string // folders walked by the last Load, for the watcher
	reads    int      // files read by the last Load
	// patched counts the Loads that patched the previous snapshot;
	// noPatch makes every Load assemble (the equality tests' reference).
	patched int
	noPatch bool

	hints     map[string]bool // absolute paths to read on the next Load
	rereadAll bool
}

// fileEntry is what one file gave: its decoded objects and problems, the
// hash of its bytes, and the identity it had when it was read.
type fileEntry struct {
	hash     [sha256.Size]byte
	objects  []object
	problems []Problem
	id       identity
	// stable is set when id proves the bytes unchanged as long as it is
	// the same: the file was read without error, and it had not been
	// modified within the racy window before.
	stable bool
}

// NewLoader returns a Loader for the given files and folders. A nil logger
// discards.
func NewLoader(paths []string, logger *slog.Logger) *Loader {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Loader{
		paths:   append([]string(nil), paths...),
		log:     logger,
		racy:    racyWindow,
		cache:   map[string]*fileEntry{},
		winners: map[objectKey]origin{},
		hints:   map[string]bool{},
	}
}

// Reread makes the next Load read the file at the absolute path abs, or
// every file below it if it is a folder, whatever their stat says. The
// watcher names the paths it had events for: a belt to the stat's braces.
func (l *Loader) Reread(abs string) {
	l.hints[filepath.Clean(abs)] = true
}

// RereadAll makes the next Load read every file, as when events were
// lost.
func (l *Loader) RereadAll() {
	l.rereadAll = true
}

// Load reads the manifests that changed and returns a full snapshot and its
// problems. changed reports whether any file's bytes (or the set of files)
// differ from the previous Load; when they do not, the previous snapshot
// is returned as is. err joins the named paths that are missing or
// unreadable; those are also in problems, and the snapshot holds the rest.
func (l *Loader) Load() (snap *source.Snapshot, problems []Problem, changed bool, err error) {
	if len(l.paths) == 0 {
		return nil, nil, false, errors.New("no manifest path given")
	}
	sc := scan(l.paths)
	l.dirs = sc.dirs
	hints, all := l.hints, l.rereadAll
	l.hints, l.rereadAll = map[string]bool{}, false

	sameProblems := l.loaded && slices.Equal(sc.problems, l.scanned)
	// As many files as before, none of them new (old == nil below), is
	// the same set of files.
	changed = !sameProblems || len(sc.files) != len(l.cache)
	previous := l.cache
	entries := make(map[string]*fileEntry, len(sc.files))
	reads := 0
	for _, f := range sc.files {
		old := l.cache[f]
		e := old
		if all || !l.unchanged(f, old, hinted(hints, sc.abs[f])) {
			e = l.readFile(f, old)
			reads++
		}
		entries[f] = e
		changed = changed || old == nil || e.hash != old.hash
	}
	l.cache, l.scanned, l.reads = entries, sc.problems, reads
	err = errors.Join(sc.errs...)
	if !changed {
		return l.last, l.problems, false, err
	}
	l.loaded = true
	if sameProblems && !l.noPatch {
		if snap, ok := l.patch(entries, previous); ok {
			l.last = snap // the problems are those of the previous Load
			l.patched++
			return l.last, l.problems, true, err
		}
	}
	l.last, l.problems = l.assemble(sc, entries)
	return l.last, l.problems, true, err
}

// patch returns the previous snapshot with the objects of the files that
// changed or came put in place, when that is all that happened:
//   - no file went away;
//   - each changed file defines the same objects as before (Services and
//     EndpointSlices), under the same keys, in the same documents, each
//     the definition that counts, with the same problems (an endpoint
//     change);
//   - each new file defines only objects no file defined before, once
//     each, Services, EndpointSlices and Ingresses naming no Secret nor
//     ConfigMap (the ones assembling might drop), without problems (a new
//     application's manifest).
//
// Anything else is assembled afresh. With thousands of objects, patching
// spares a map of all of them and a sort of every list (1.4 ms at 1,000
// Ingresses). The previous snapshot is not modified: the pipeline
// compares it with the new one.
func (l *Loader) patch(entries, previous map[string]*fileEntry) (*source.Snapshot, bool) {
	if l.last == nil {
		return nil, false
	}
	// A file that went away is noticed by its path, not by a count: a
	// removal and a new file in one scan leave the count as it was, and
	// the removed file's objects must not stay in the snapshot.
	for f := range previous {
		if entries[f] == nil {
			return nil, false
		}
	}
	type change struct {
		file string
		o    object
		add  bool // a new object, else one in place of another
	}
	var todo []change
	added := map[objectKey]bool{}
	for f, e := range entries {
		old, ok := previous[f]
		switch {
		case !ok:
			if len(e.problems) > 0 {
				return nil, false
			}
			for _, o := range e.objects {
				if _, defined := l.winners[o.key]; defined || added[o.key] || !insertable(o.obj) {
					return nil, false
				}
				added[o.key] = true
				todo = append(todo, change{file: f, o: o, add: true})
			}
		case e.hash == old.hash:
		case len(e.objects) != len(old.objects) || !slices.Equal(e.problems, old.problems):
			return nil, false
		default:
			for i, o := range e.objects {
				was := old.objects[i]
				if o.key != was.key || o.pos.doc != was.pos.doc || !patchable(o.obj) {
					return nil, false
				}
				if w, ok := l.winners[o.key]; !ok || w.file != f || w.doc != o.pos.doc {
					return nil, false
				}
				todo = append(todo, change{file: f, o: o})
			}
		}
	}
	snap := *l.last
	snap.Services = slices.Clone(snap.Services)
	snap.EndpointSlices = slices.Clone(snap.EndpointSlices)
	snap.Ingresses = slices.Clone(snap.Ingresses)
	for _, c := range todo {
		var ok bool
		switch obj := c.o.obj.(type) {
		case *corev1.Service:
			snap.Services, ok = putByName(snap.Services, obj, c.add)
		case *discoveryv1.EndpointSlice:
			snap.EndpointSlices, ok = putByName(snap.EndpointSlices, obj, c.add)
		case *networkingv1.Ingress:
			snap.Ingresses, ok = putByName(snap.Ingresses, obj, c.add)
		}
		if !ok {
			return nil, false
		}
	}
	for _, c := range todo {
		l.winners[c.o.key] = origin{file: c.file, doc: c.o.pos.doc, obj: c.o.obj}
	}
	return &snap, true
}

// patchable: kinds whose objects the snapshot holds as they are, sorted by
// name, and that nothing else in the assembly depends on (dropUnreferenced
// reads Ingresses).
func patchable(obj kubeObject) bool {
	switch obj.(type) {
	case *corev1.Service, *discoveryv1.EndpointSlice:
		return true
	}
	return false
}

// insertable: what a new file may bring into a patched snapshot. An
// Ingress counts if it names no Secret nor ConfigMap: those named decide
// which ones the assembly keeps.
func insertable(obj kubeObject) bool {
	if ing, ok := obj.(*networkingv1.Ingress); ok {
		return len(annotation.Secrets(ing)) == 0 && len(annotation.ConfigMaps(ing)) == 0
	}
	return patchable(obj)
}

// putByName puts obj in list, sorted by namespace and name: in place of
// the object of its name (add false), or as a new one (add true). ok is
// false when the list does not hold such an object, or already does.
func putByName[T kubeObject](list []T, obj T, add bool) (_ []T, ok bool) {
	i, found := slices.BinarySearchFunc(list, obj, byName[T])
	switch {
	case found == add:
		return list, false
	case add:
		return slices.Insert(list, i, obj), true
	}
	list[i] = obj
	return list, true
}

// unchanged reports whether the file at path is known to hold the bytes
// old was read from, by one stat.
func (l *Loader) unchanged(path string, old *fileEntry, hinted bool) bool {
	if old == nil || !old.stable || hinted {
		return false
	}
	id, ok := statIdentity(path)
	return ok && id == old.id
}

// hinted reports whether abs, or a folder above it, is in hints.
func hinted(hints map[string]bool, abs string) bool {
	if len(hints) == 0 {
		return false
	}
	for p := abs; ; p = filepath.Dir(p) {
		if hints[p] {
			return true
		}
		if parent := filepath.Dir(p); parent == p {
			return false
		}
	}
}

// assemble builds the snapshot from decoded files in path order, so that
// the first of duplicate objects wins deterministically.
func (l *Loader) assemble(sc scanResult, entries map[string]*fileEntry) (*source.Snapshot, []Problem) {
	snap := &source.Snapshot{}
	problems := append([]Problem(nil), sc.problems...)
	count := 0
	for _, e := range entries {
		count += len(e.objects)
	}
	// Sized up front: growing it was most of the assembly's cost.
	seen := make(map[objectKey]origin, count)
	for _, f := range sc.files {
		e := entries[f]
		problems = append(problems, e.problems...)
		for _, o := range e.objects {
			if first, dup := seen[o.key]; dup {
				problems = append(problems, Problem{File: f, Doc: o.pos.doc, Line: o.pos.line,
					Message: fmt.Sprintf("%s%s: duplicate ignored, %s doc %d defines it first",
						o.pos.itemPrefix(), o.key, first.file, first.doc)})
				continue
			}
			seen[o.key] = origin{file: f, doc: o.pos.doc, obj: o.obj}
			add(snap, o.obj)
		}
	}
	l.winners = seen
	dropUnreferenced(snap)
	sortSnapshot(snap)
	return snap, problems
}

// origin is where the object of a key in a snapshot came from: the first
// definition by (file path, document). Its creationTimestamp is the one a
// new definition of the key is given, as an update keeps it.
type origin struct {
	file string
	doc  int
	obj  kubeObject
}

// objectKey identifies an object the way the apiserver does.
type objectKey struct {
	kind, namespace, name string
}

func (k objectKey) String() string {
	if k.namespace == "" {
		return k.kind + " " + k.name
	}
	return k.kind + " " + k.namespace + "/" + k.name
}

// position locates a document, and an item when it came from a List.
type position struct {
	doc, line, item int
}

func (p position) itemPrefix() string {
	if p.item == 0 {
		return ""
	}
	return fmt.Sprintf("List item %d: ", p.item)
}

// isEditorTemp reports names that editors and tools write next to the file
// being edited; they are never manifests.
func isEditorTemp(name string) bool {
	return strings.HasSuffix(name, "~") ||
		(len(name) > 1 && strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#")) ||
		strings.HasSuffix(name, ".swp") || strings.HasSuffix(name, ".swx") ||
		strings.HasSuffix(name, ".swo") || name == "4913"
}
