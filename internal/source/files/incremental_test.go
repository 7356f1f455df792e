package files

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"pier.dev/pier/internal/source"
)

// TestLoaderIncrementalEqualsFull applies random sequences of writes,
// renames and removals to a manifest tree and checks after each that a
// Loader reading only what changed gives the same snapshot, problems,
// error and changed flag as one reading every file (the reader before
// reads became incremental). Each variant stresses one way of noticing a change:
//   - default: the production racy window and no hints, as `pier run`
//     polling; nearly every file is recent, so it is read again;
//   - stat: a racy window of 30 ms (this kernel stamps files with a tick of
//     a few milliseconds) and pauses, so most files are known by their
//     stat alone, as after events were lost;
//   - hints: no racy window at all, only the stat and the paths the
//     watcher would name; a file outside the watched folders (a symlink's
//     target) is then only ever replaced by rename.
func TestLoaderIncrementalEqualsFull(t *testing.T) {
	variants := []struct {
		name  string
		racy  time.Duration
		hints bool
		pause bool // sometimes wait longer than racy before an operation
	}{
		{name: "default", racy: racyWindow},
		{name: "stat", racy: 30 * time.Millisecond, pause: true},
		{name: "hints", racy: 0, hints: true},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			for seed := range uint64(4) {
				tr := newTree(t, seed)
				ref := NewLoader(tr.paths, nil)
				ref.noPatch = true
				inc := NewLoader(tr.paths, nil)
				inc.racy = v.racy
				refReads, incReads := 0, 0
				for step := range 60 {
					if v.pause && tr.rnd.IntN(5) == 0 {
						time.Sleep(v.racy + 10*time.Millisecond)
					}
					op, touched := tr.randomOp(!v.hints)
					if v.hints {
						for _, p := range touched {
							inc.Reread(p)
						}
					}
					ref.RereadAll()
					refSnap, refProblems, refChanged, refErr := ref.Load()
					incSnap, incProblems, incChanged, incErr := inc.Load()
					refReads += ref.reads
					incReads += inc.reads
					where := fmt.Sprintf("seed %d step %d (%s)", seed, step, op)
					if !equality.Semantic.DeepEqual(refSnap, incSnap) {
						t.Fatalf("%s: snapshots differ:\nfull:        %v\nincremental: %v", where,
							summary(refSnap), summary(incSnap))
					}
					if !equality.Semantic.DeepEqual(refProblems, incProblems) {
						t.Fatalf("%s: problems differ:\nfull:        %v\nincremental: %v", where, refProblems, incProblems)
					}
					if refChanged != incChanged || (refErr == nil) != (incErr == nil) {
						t.Fatalf("%s: changed %v, err %v; full read: changed %v, err %v", where,
							incChanged, incErr, refChanged, refErr)
					}
				}
				if inc.patched == 0 {
					t.Errorf("seed %d: no Load patched the previous snapshot: the patch path went untested", seed)
				}
				if v.name != "default" && incReads >= refReads {
					t.Errorf("seed %d: the incremental loader read %d files, the full one %d: nothing was saved",
						seed, incReads, refReads)
				}
				t.Logf("seed %d: files read: incremental %d, full %d; snapshots patched %d", seed, incReads, refReads, inc.patched)
			}
		})
	}
}

// tree is a manifest folder with a subfolder, a symlinked file whose
// target is elsewhere, and a file named on its own as well.
type tree struct {
	t       *testing.T
	rnd     *rand.Rand
	dir     string // the named folder
	outside string // the symlink's target and the named file live here
	paths   []string
	apps    int // applications added (randomOp)
}

var treeFiles = []string{"a.yaml", "b.yaml", "c.json", "sub/d.yaml", "sub/deeper/e.yml", "z.yaml"}

// endpointsFile holds objects no other file defines, whose contents
// change under the same names (an endpoint change): the snapshot can be
// patched, unless an operation on the other files changed something else
// at the same time.
const endpointsFile = "ep.yaml"

// endpoints is endpointsFile's content: Service e1 and the EndpointSlices
// e1-a and e1-b, each with a random port or address; sometimes a broken
// document after them.
func (tr *tree) endpoints() string {
	docs := []string{
		fmt.Sprintf("apiVersion: v1\nkind: Service\nmetadata: {name: e1}\nspec: {ports: [{port: %d}]}\n", 80+tr.rnd.IntN(3)),
	}
	for _, name := range []string{"e1-a", "e1-b"} {
		docs = append(docs, fmt.Sprintf("apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n"+
			"metadata: {name: %s, labels: {kubernetes.io/service-name: e1}}\naddressType: IPv4\n"+
			"endpoints: [{addresses: [10.0.0.%d]}]\n", name, 1+tr.rnd.IntN(3)))
	}
	if tr.rnd.IntN(4) == 0 {
		docs = append(docs, "kind: [\n")
	}
	return strings.Join(docs, "---\n")
}

func newTree(t *testing.T, seed uint64) *tree {
	tr := &tree{t: t, rnd: rand.New(rand.NewPCG(seed, 9)), dir: t.TempDir(), outside: t.TempDir()}
	for _, f := range treeFiles {
		writeFile(t, filepath.Join(tr.dir, f), tr.content(f))
	}
	target := filepath.Join(tr.outside, "target.yaml")
	writeFile(t, target, tr.content(target))
	if err := os.Symlink(target, filepath.Join(tr.dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(tr.outside, "named.yaml")
	writeFile(t, named, tr.content(named))
	writeFile(t, filepath.Join(tr.dir, endpointsFile), tr.endpoints())
	writeFile(t, filepath.Join(tr.dir, "secrets.yaml"),
		"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: Opaque\ndata: {auth: dTokJGFwcjEk}\n")
	// The folder, a file inside it named again, and a file outside.
	tr.paths = []string{tr.dir, filepath.Join(tr.dir, "a.yaml"), named}
	return tr
}

// content is random manifest text for path: objects of a few names, so
// that files define the same objects (duplicates), texts of equal size
// (a rewrite the stat may not see), broken and half written documents.
func (tr *tree) content(path string) string {
	pick := func(s ...string) string { return s[tr.rnd.IntN(len(s))] }
	if strings.HasSuffix(path, ".json") {
		return pick(`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"b"}}`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}} { broken`, "")
	}
	var docs []string
	for range tr.rnd.IntN(3) + 1 {
		switch tr.rnd.IntN(5) {
		case 0, 1:
			docs = append(docs, svcYAML(pick("a", "b", "c")))
		case 2:
			docs = append(docs, ingressDoc(pick("x", "y"))+"  ingressClassName: "+pick("one", "two")+"\n")
		case 3:
			docs = append(docs, "kind: [\n")
		case 4:
			full := svcYAML(pick("a", "b", "c"))
			docs = append(docs, full[:tr.rnd.IntN(len(full))]) // half written
		}
	}
	return strings.Join(docs, "---\n")
}

// addApp writes a new application: a file of objects no other file
// defines (the snapshot is patched), sometimes with an Ingress that names
// a Secret, or a broken document (assembled). It returns the file's path
// and the application's name.
func (tr *tree) addApp() (path, name string) {
	tr.apps++
	name = fmt.Sprintf("app%d", tr.apps)
	docs := []string{svcYAML(name), ingressDoc(name) + "  ingressClassName: one\n"}
	switch tr.rnd.IntN(4) {
	case 0:
		// Secret s (newTree) is kept only while an Ingress names it.
		docs[1] = strings.Replace(docs[1], "metadata:",
			"metadata:\n  annotations: {pier.dev/auth-type: basic, pier.dev/auth-secret: s}", 1)
	case 1:
		docs = append(docs, "kind: [\n")
	}
	path = filepath.Join(tr.dir, "apps", name+".yaml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	renameInto(tr.t, path, strings.Join(docs, "---\n"))
	return path, name
}

// randomOp changes the tree and returns what it did and the absolute
// paths a watcher would have events for. inPlaceOutside allows writing
// the symlink's target in place, which no watched folder sees.
func (tr *tree) randomOp(inPlaceOutside bool) (string, []string) {
	t := tr.t
	rel := treeFiles[tr.rnd.IntN(len(treeFiles))]
	path := filepath.Join(tr.dir, rel)
	switch tr.rnd.IntN(15) {
	case 12, 13:
		app, name := tr.addApp()
		return "add " + name, []string{app}
	case 14:
		apps, _ := filepath.Glob(filepath.Join(tr.dir, "apps", "*.yaml"))
		if len(apps) == 0 {
			return "no application to remove", nil
		}
		app := apps[tr.rnd.IntN(len(apps))]
		_ = os.Remove(app)
		if tr.rnd.IntN(2) == 0 {
			return "remove " + filepath.Base(app), []string{app}
		}
		// Another application in the same scan: the number of files is
		// as it was, and only their names tell that one went away.
		added, name := tr.addApp()
		return "replace " + filepath.Base(app) + " by " + name, []string{app, added}
	case 9, 10:
		ep := filepath.Join(tr.dir, endpointsFile)
		writeFile(t, ep, tr.endpoints())
		return "write " + endpointsFile, []string{ep}
	case 11:
		ep := filepath.Join(tr.dir, endpointsFile)
		renameInto(t, ep, tr.endpoints())
		return "rename into " + endpointsFile, []string{ep}
	case 0, 1:
		writeFile(t, path, tr.content(path))
		return "write " + rel, []string{path}
	case 2:
		renameInto(t, path, tr.content(path))
		return "rename into " + rel, []string{path}
	case 3:
		_ = os.Remove(path)
		return "remove " + rel, []string{path}
	case 4:
		to := filepath.Join(tr.dir, treeFiles[tr.rnd.IntN(len(treeFiles))])
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.Rename(path, to)
		return "move " + rel + " to " + to, []string{path, to}
	case 5:
		sub := filepath.Join(tr.dir, "sub")
		if err := os.RemoveAll(sub); err != nil {
			t.Fatal(err)
		}
		return "remove sub", []string{sub}
	case 6:
		target := filepath.Join(tr.outside, "target.yaml")
		if inPlaceOutside {
			writeFile(t, target, tr.content(target))
			return "write the link's target", nil
		}
		renameInto(t, target, tr.content(target))
		return "rename into the link's target", nil
	case 7:
		named := filepath.Join(tr.outside, "named.yaml")
		if tr.rnd.IntN(4) == 0 {
			_ = os.Remove(named)
			return "remove the named file", []string{named}
		}
		writeFile(t, named, tr.content(named))
		return "write the named file", []string{named}
	default:
		now := time.Now()
		_ = os.Chtimes(path, now, now)
		return "touch " + rel, []string{path}
	}
}

// summary names what a snapshot holds, with what the random contents vary.
func summary(s *source.Snapshot) string {
	var b strings.Builder
	for _, svc := range s.Services {
		fmt.Fprintf(&b, "Service %s/%s %v; ", svc.Namespace, svc.Name, svc.CreationTimestamp.UnixNano())
	}
	for _, ing := range s.Ingresses {
		fmt.Fprintf(&b, "Ingress %s/%s class %s %v; ", ing.Namespace, ing.Name,
			*ing.Spec.IngressClassName, ing.CreationTimestamp.UnixNano())
	}
	return b.String()
}

// TestLoaderRacyWindow: a rewrite with other bytes of the same size
// within one timestamp tick leaves the stat as it was (kernels with
// multigrain timestamps avoid it, older ones do not). The test makes the
// kept identity equal to the new stat, as such a rewrite would: a file
// read within the racy window of its modification must be read again all
// the same, and one read after it is known by its stat alone.
func TestLoaderRacyWindow(t *testing.T) {
	for _, tc := range []struct {
		name string
		racy time.Duration
		want string
	}{
		{"recent file read again", racyWindow, "default/b"},
		{"old file trusted by its stat", 0, "default/a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.yaml")
			writeFile(t, path, svcYAML("a"))
			l := NewLoader([]string{path}, nil)
			l.racy = tc.racy
			if _, _, _, err := l.Load(); err != nil {
				t.Fatal(err)
			}
			writeFile(t, path, svcYAML("b"))
			id, ok := statIdentity(path)
			if !ok {
				t.Fatal("no identity")
			}
			l.cache[path].id = id // as if the rewrite had not changed the stat
			snap, _, _, err := l.Load()
			if err != nil {
				t.Fatal(err)
			}
			if got := names(snap.Services); !slices.Equal(got, []string{tc.want}) {
				t.Errorf("services %v, want %v", got, tc.want)
			}
		})
	}
}
