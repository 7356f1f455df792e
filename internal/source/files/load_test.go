package files

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"pier.dev/pier/internal/source"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustLoad(t *testing.T, paths ...string) (*source.Snapshot, []Problem) {
	t.Helper()
	snap, problems, err := Load(paths)
	if err != nil {
		t.Fatalf("Load(%v): %v", paths, err)
	}
	return snap, problems
}

// names lists namespace/name of objects, in snapshot order.
func names[T interface {
	GetNamespace() string
	GetName() string
}](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		if o.GetNamespace() == "" {
			out = append(out, o.GetName())
		} else {
			out = append(out, o.GetNamespace()+"/"+o.GetName())
		}
	}
	return out
}

func TestLoadBasic(t *testing.T) {
	snap, problems := mustLoad(t, "testdata/basic")
	if len(problems) != 0 {
		t.Fatalf("problems: %v", problems)
	}
	check := func(what string, got, want []string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("ingresses", names(snap.Ingresses), []string{"blog/blog", "default/shop", "team-a/nested"})
	check("ingress classes", names(snap.IngressClasses), []string{"pier"})
	check("services", names(snap.Services), []string{"blog/blog", "default/api", "default/web"})
	check("endpoint slices", names(snap.EndpointSlices), []string{"default/api-abc12"})
	check("secrets", names(snap.Secrets), []string{"default/opaque-tls", "default/shop-tls"})

	shop := snap.Ingresses[1]
	paths := shop.Spec.Rules[0].HTTP.Paths
	var types []string
	for _, p := range paths {
		types = append(types, string(*p.PathType))
	}
	check("path types", types, []string{"Prefix", "Exact", "ImplementationSpecific"})
	if got := paths[0].Backend.Service.Port.Name; got != "http" {
		t.Errorf("named service port = %q, want http", got)
	}
	if shop.Spec.DefaultBackend == nil || shop.Spec.TLS[0].SecretName != "shop-tls" {
		t.Errorf("defaultBackend or TLS lost: %+v", shop.Spec)
	}
	if shop.UID != "" {
		t.Errorf("UID = %q, want none", shop.UID)
	}
	info, err := os.Stat("testdata/basic/ingress.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !shop.CreationTimestamp.Time.Equal(info.ModTime()) {
		t.Errorf("creationTimestamp = %v, want file mtime %v", shop.CreationTimestamp, info.ModTime())
	}
	if ns := snap.IngressClasses[0].Namespace; ns != "" {
		t.Errorf("IngressClass namespace = %q, want cleared", ns)
	}
}

func TestLoadBasicDefaults(t *testing.T) {
	snap, _ := mustLoad(t, "testdata/basic")
	api, web := snap.Services[1], snap.Services[2]
	if api.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("service type = %q, want ClusterIP", api.Spec.Type)
	}
	for _, p := range api.Spec.Ports {
		if p.Protocol != corev1.ProtocolTCP {
			t.Errorf("port %s protocol = %q, want TCP", p.Name, p.Protocol)
		}
	}
	if got := api.Spec.Ports[0].TargetPort; got != intstr.FromString("web") {
		t.Errorf("named targetPort = %v, want web", got)
	}
	if got := api.Spec.Ports[1].TargetPort; got != intstr.FromInt32(9000) {
		t.Errorf("defaulted targetPort = %v, want 9000", got)
	}
	if web.Spec.Ports[0].Protocol != corev1.ProtocolUDP {
		t.Errorf("explicit protocol overwritten: %q", web.Spec.Ports[0].Protocol)
	}
	if want := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC); !web.CreationTimestamp.Time.Equal(want) {
		t.Errorf("explicit creationTimestamp = %v, want %v", web.CreationTimestamp, want)
	}

	es := snap.EndpointSlices[0]
	if es.Endpoints[0].Conditions.Ready != nil {
		t.Errorf("unset ready = %v, want nil (which means ready)", *es.Endpoints[0].Conditions.Ready)
	}
	if r := es.Endpoints[1].Conditions.Ready; r == nil || *r {
		t.Errorf("ready: false lost: %v", r)
	}
	for _, p := range es.Ports {
		if p.Protocol == nil || *p.Protocol != corev1.ProtocolTCP || p.Name == nil {
			t.Errorf("endpoint port not defaulted: %+v", p)
		}
	}

	tls := snap.Secret("default", "shop-tls")
	if tls == nil {
		t.Fatal("shop-tls missing")
	}
	if crt := string(tls.Data[corev1.TLSCertKey]); !strings.HasPrefix(crt, "-----BEGIN CERTIFICATE-----") {
		t.Errorf("stringData did not override data: tls.crt = %q", crt)
	}
	if len(tls.Data[corev1.TLSPrivateKeyKey]) == 0 || tls.StringData != nil {
		t.Errorf("stringData not merged: %+v", tls)
	}
	if opaque := snap.Secret("default", "opaque-tls"); string(opaque.Data["tls.key"]) != "key" {
		t.Errorf("base64 data not decoded: %q", opaque.Data["tls.key"])
	}
}

const goodIngress = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
spec:
  defaultBackend:
    service: {name: web, port: {number: 80}}
`

func ingressDoc(name string) string { return strings.Replace(goodIngress, "%s", name, 1) }

func TestLoadProblems(t *testing.T) {
	tests := []struct {
		name     string
		content  string
		wantDocs []int    // Doc of each problem, in order
		wantMsgs []string // a substring of each problem
		wantKept []string // ingresses and services kept
	}{{
		name:     "bad document among good ones",
		content:  ingressDoc("a") + "---\nkind: Ingress\n  bad: [indent\n---\n" + ingressDoc("c"),
		wantDocs: []int{2}, wantMsgs: []string{"invalid YAML"},
		wantKept: []string{"default/a", "default/c"},
	}, {
		name:     "unknown field",
		content:  ingressDoc("a") + "---\n" + ingressDoc("x") + "  rulez: []\n",
		wantDocs: []int{2}, wantMsgs: []string{`Ingress default/x: unknown field "spec.rulez"`},
		wantKept: []string{"default/a"},
	}, {
		name:     "duplicate key",
		content:  "apiVersion: v1\nkind: Service\nmetadata:\n  name: a\n  name: b\n",
		wantDocs: []int{1}, wantMsgs: []string{`"name" already set`},
	}, {
		name:     "duplicate key in an ignored kind is not a problem",
		content:  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  name: b\n",
		wantDocs: []int{}, wantMsgs: []string{},
	}, {
		name:     "missing kind",
		content:  "apiVersion: v1\nmetadata: {name: a}\n",
		wantDocs: []int{1}, wantMsgs: []string{"apiVersion and kind are required"},
	}, {
		name:     "old Ingress version",
		content:  strings.Replace(ingressDoc("a"), "networking.k8s.io/v1", "networking.k8s.io/v1beta1", 1),
		wantDocs: []int{1}, wantMsgs: []string{"networking.k8s.io/v1beta1 is not supported, use networking.k8s.io/v1"},
	}, {
		// Another group, which pier reads nothing of: without its own rule
		// it was ignored in silence.
		name:     "extensions/v1beta1 Ingress",
		content:  strings.Replace(ingressDoc("a"), "networking.k8s.io/v1", "extensions/v1beta1", 1),
		wantDocs: []int{1}, wantMsgs: []string{"Ingress default/a: extensions/v1beta1 is not supported, use networking.k8s.io/v1"},
	}, {
		name:     "extensions/v1beta1 IngressList",
		content:  "apiVersion: extensions/v1beta1\nkind: IngressList\nitems: []\n",
		wantDocs: []int{1}, wantMsgs: []string{"extensions/v1beta1 is not supported, use networking.k8s.io/v1"},
	}, {
		name:     "misspelt kind",
		content:  "apiVersion: v1\nkind: Servce\nmetadata: {name: a}\n",
		wantDocs: []int{1}, wantMsgs: []string{"Servce default/a: unknown kind in v1"},
	}, {
		name:     "unknown group is ignored",
		content:  "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: a}\n",
		wantDocs: []int{}, wantMsgs: []string{},
	}, {
		name:     "missing name",
		content:  "apiVersion: v1\nkind: Service\nmetadata: {namespace: x}\n",
		wantDocs: []int{1}, wantMsgs: []string{"metadata.name is required"},
	}, {
		name:     "invalid name",
		content:  "apiVersion: v1\nkind: Service\nmetadata: {name: Web_1}\n",
		wantDocs: []int{1}, wantMsgs: []string{`metadata.name "Web_1"`},
	}, {
		name: "missing pathType",
		content: ingressDoc("a") + "  rules:\n  - http:\n      paths:\n      - path: /\n" +
			"        backend: {service: {name: web, port: {number: 80}}}\n",
		wantDocs: []int{1}, wantMsgs: []string{"spec.rules[0].http.paths[0].pathType is required"},
	}, {
		name:     "TLS secret without key",
		content:  "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/tls\nmetadata: {name: s}\nstringData: {tls.crt: x}\n",
		wantDocs: []int{1}, wantMsgs: []string{`Secret default/s: type kubernetes.io/tls requires data "tls.crt" and "tls.key"`},
	}, {
		name:     "invalid base64",
		content:  "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\ndata: {tls.crt: '!!!'}\n",
		wantDocs: []int{1}, wantMsgs: []string{"Secret default/s: "},
	}, {
		name:     "wrong type",
		content:  "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: shop}\nspec: {ports: [{port: eighty}]}\n",
		wantDocs: []int{1}, wantMsgs: []string{"Service shop/s: json: cannot unmarshal string into Go struct field ServicePort.spec.ports.port of type int32"},
	}, {
		name:     "YAML 1.1 boolean where a string is expected",
		content:  "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: n}\n",
		wantDocs: []int{1}, wantMsgs: []string{"metadata.namespace of type string"},
	}, {
		name:     "not an object",
		content:  "# a list, not an object\n- a\n- b\n---\n" + ingressDoc("a"),
		wantDocs: []int{1}, wantMsgs: []string{"not a Kubernetes object"},
		wantKept: []string{"default/a"},
	}, {
		name:     "empty documents are not counted",
		content:  "---\n# nothing\n---\n\n---\n" + ingressDoc("a") + "---\n---\nkind: Service\n",
		wantDocs: []int{2}, wantMsgs: []string{"apiVersion and kind are required"},
		wantKept: []string{"default/a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.yaml")
			writeFile(t, path, tt.content)
			snap, problems := mustLoad(t, path)
			checkProblems(t, problems, path, tt.wantDocs, tt.wantMsgs)
			kept := append(names(snap.Ingresses), names(snap.Services)...)
			if len(kept) != len(tt.wantKept) || (len(kept) > 0 && !slices.Equal(kept, tt.wantKept)) {
				t.Errorf("kept %v, want %v", kept, tt.wantKept)
			}
		})
	}
}

func checkProblems(t *testing.T, problems []Problem, file string, docs []int, msgs []string) {
	t.Helper()
	if len(problems) != len(msgs) {
		t.Fatalf("got %d problems, want %d: %v", len(problems), len(msgs), problems)
	}
	for i, p := range problems {
		if p.File != file || p.Doc != docs[i] || !strings.Contains(p.Message, msgs[i]) {
			t.Errorf("problem %d = %q, want %s doc %d containing %q", i, p.String(), file, docs[i], msgs[i])
		}
	}
}

func TestProblemString(t *testing.T) {
	p := Problem{File: "file.yaml", Doc: 3, Line: 12, Message: "Ingress default/x: unknown field"}
	if got, want := p.String(), "file.yaml doc 3 (line 12): Ingress default/x: unknown field"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	p = Problem{File: "big.yaml", Message: "too big"}
	if got, want := p.String(), "big.yaml: too big"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestLoadLists(t *testing.T) {
	dir := t.TempDir()
	list := "apiVersion: v1\nkind: List\nitems:\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: a}}\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: b}, spec: {portz: []}}\n" +
		"- {apiVersion: v1, kind: List, items: []}\n" +
		"- {apiVersion: v1, kind: Service, metadata: {name: c}}\n" +
		"---\n" +
		"apiVersion: networking.k8s.io/v1\nkind: IngressList\nitems:\n" +
		"- metadata: {name: typed, namespace: x}\n" +
		"  spec: {defaultBackend: {service: {name: web, port: {number: 80}}}}\n"
	path := filepath.Join(dir, "list.yaml")
	writeFile(t, path, list)
	snap, problems := mustLoad(t, path)
	checkProblems(t, problems, path, []int{1, 1}, []string{
		`List item 2: Service default/b: unknown field "spec.portz"`,
		"List item 3: List default/(no name): a List inside a List is not supported",
	})
	if got := names(snap.Services); !slices.Equal(got, []string{"default/a", "default/c"}) {
		t.Errorf("services = %v", got)
	}
	if got := names(snap.Ingresses); !slices.Equal(got, []string{"x/typed"}) {
		t.Errorf("typed list items = %v", got)
	}
}

func TestLoadJSONStream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.json")
	writeFile(t, path, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"a"}}
{"apiVersion":"v1","kind":"Service","metadata":{"name":"b"},"spec":{"typo":1}}
{"apiVersion":"v1","kind":"Service","metadata":{"name":"c"}}
{ broken`)
	snap, problems := mustLoad(t, path)
	if len(problems) != 2 || problems[0].Line != 4 || !strings.Contains(problems[0].Message, "invalid JSON") ||
		problems[1].Doc != 2 || problems[1].Line != 2 || !strings.Contains(problems[1].Message, `unknown field "spec.typo"`) {
		t.Errorf("problems = %v", problems)
	}
	if got := names(snap.Services); !slices.Equal(got, []string{"default/a", "default/c"}) {
		t.Errorf("services = %v", got)
	}
}

func TestLoadDuplicates(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, b, "apiVersion: v1\nkind: Service\nmetadata: {name: x}\n---\n"+
		ingressDoc("x")+"  ingressClassName: second\n---\n"+
		strings.Replace(ingressDoc("x"), "name: x", "{name: x, namespace: other}", 1))
	writeFile(t, a, ingressDoc("x")+"  ingressClassName: first\n")
	// Naming the folder and one of its files reads that file once.
	snap, problems := mustLoad(t, b, dir)
	checkProblems(t, problems, b, []int{2}, []string{"Ingress default/x: duplicate ignored, " + a + " doc 1 defines it first"})
	if got := names(snap.Ingresses); !slices.Equal(got, []string{"default/x", "other/x"}) {
		t.Fatalf("ingresses = %v", got)
	}
	if got := *snap.Ingresses[0].Spec.IngressClassName; got != "first" {
		t.Errorf("winner = %q, want the one from a.yaml", got)
	}
	if len(snap.Services) != 1 {
		t.Errorf("a Service named like an Ingress is not a duplicate: %v", names(snap.Services))
	}
}

func TestLoadFileSelection(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	svc := func(name string) string { return "apiVersion: v1\nkind: Service\nmetadata: {name: " + name + "}\n" }
	for file, name := range map[string]string{
		"a.yaml": "a", "b.yml": "b", "c.json": "c", "D.YAML": "d", "sub/deeper/e.yaml": "e",
		".hidden.yaml": "hidden", "f.yaml~": "tilde", "#g.yaml#": "hash", ".g.yaml.swp": "swp",
		"notes.txt": "txt", ".git/h.yaml": "hiddendir",
	} {
		writeFile(t, filepath.Join(dir, file), svc(name))
	}
	writeFile(t, filepath.Join(dir, "c.json"), `{"apiVersion":"v1","kind":"Service","metadata":{"name":"c"}}`)
	writeFile(t, filepath.Join(outside, "linked.yaml"), svc("linked"))
	writeFile(t, filepath.Join(outside, "d/in-linked-dir.yaml"), svc("linkeddir"))
	for link, target := range map[string]string{"link.yaml": "linked.yaml", "linkdir": "d"} {
		if err := os.Symlink(filepath.Join(outside, target), filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	named := filepath.Join(outside, "named.txt")
	writeFile(t, named, svc("named"))

	snap, problems := mustLoad(t, dir, named)
	if len(problems) != 0 {
		t.Errorf("problems: %v", problems)
	}
	want := []string{"default/a", "default/b", "default/c", "default/d", "default/e", "default/linked", "default/named"}
	if got := names(snap.Services); !slices.Equal(got, want) {
		t.Errorf("services = %v, want %v", got, want)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	if _, _, err := Load([]string{missing}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error = %v, want not exist", err)
	}
	if _, _, err := Load(nil); err == nil {
		t.Error("Load(nil) succeeded")
	}

	big := filepath.Join(dir, "big.yaml")
	writeFile(t, big, "# "+strings.Repeat("x", MaxFileSize))
	writeFile(t, filepath.Join(dir, "ok.yaml"), ingressDoc("ok"))
	snap, problems := mustLoad(t, dir)
	checkProblems(t, problems, big, []int{0}, []string{"MaxFileSize"})
	if len(snap.Ingresses) != 1 {
		t.Errorf("a big file hid the others: %v", names(snap.Ingresses))
	}
}

func TestLoaderChanges(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, a, ingressDoc("a"))
	writeFile(t, b, ingressDoc("b"))
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, f := range []string{a, b} {
		if err := os.Chtimes(f, old, old); err != nil {
			t.Fatal(err)
		}
	}
	l := NewLoader([]string{dir}, nil)
	load := func(wantChanged bool) *source.Snapshot {
		t.Helper()
		snap, _, changed, err := l.Load()
		if err != nil || changed != wantChanged {
			t.Fatalf("Load() changed = %v, err = %v; want changed %v", changed, err, wantChanged)
		}
		return snap
	}
	first := load(true)
	if second := load(false); second != first {
		t.Error("an unchanged load returned a new snapshot")
	}
	if err := os.Chtimes(a, time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	load(false) // touched, not changed

	writeFile(t, a, ingressDoc("a")+"  ingressClassName: edited\n---\n"+ingressDoc("new"))
	snap := load(true)
	byName := map[string]*networkingv1.Ingress{}
	for _, ing := range snap.Ingresses {
		byName[ing.Name] = ing
	}
	if ts := byName["a"].CreationTimestamp.Time; !ts.Equal(old) {
		t.Errorf("edited object's creationTimestamp = %v, want kept %v", ts, old)
	}
	if ts := byName["new"].CreationTimestamp.Time; ts.Equal(old) {
		t.Errorf("new object's creationTimestamp = %v, want the file's new mtime", ts)
	}
	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	if got := names(load(true).Ingresses); !slices.Equal(got, []string{"default/a", "default/new"}) {
		t.Errorf("after removing b.yaml: %v", got)
	}
}

// TestLoaderRemovalWithNewFile: one file removed and another added
// between two Loads leaves the number of files as it was. The new file
// alone would be patched into the previous snapshot; the removed file's
// Ingresses must go all the same.
func TestLoaderRemovalWithNewFile(t *testing.T) {
	dir := t.TempDir()
	gone, added := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "z.yaml")
	writeFile(t, gone, ingressDoc("a1")+"---\n"+ingressDoc("a2"))
	writeFile(t, filepath.Join(dir, "b.yaml"), svcYAML("b"))
	l := NewLoader([]string{dir}, nil)
	if _, _, _, err := l.Load(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	writeFile(t, added, ingressDoc("z"))
	snap, _, changed, err := l.Load()
	if err != nil || !changed {
		t.Fatalf("Load() changed = %v, err = %v; want changed", changed, err)
	}
	if got := names(snap.Ingresses); !slices.Equal(got, []string{"default/z"}) {
		t.Errorf("Ingresses after removing a.yaml and adding z.yaml: %v, want [default/z]", got)
	}
	if got := names(snap.Services); !slices.Equal(got, []string{"default/b"}) {
		t.Errorf("Services: %v, want [default/b]", got)
	}
}

// Nodes: Ready whatever their status, Draining from spec.unschedulable,
// cluster-scoped, strictly decoded, and checked like any other kind.
func TestLoadNodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nodes.yaml")
	writeFile(t, path, "apiVersion: v1\nkind: Node\nmetadata: {name: worker-b}\n"+
		"---\n"+
		"apiVersion: v1\nkind: Node\nmetadata: {name: worker-a, namespace: shop}\nspec: {unschedulable: true}\n"+
		"status:\n  conditions: [{type: Ready, status: 'False'}]\n  addresses: [{type: InternalIP, address: 10.0.0.1}]\n"+
		"---\n"+
		"apiVersion: v1\nkind: Node\nmetadata: {name: Worker_C}\n"+
		"---\n"+
		"apiVersion: v1\nkind: Node\nmetadata: {name: worker-d}\nspec: {unschedulabel: true}\n"+
		"---\n"+
		"apiVersion: v1\nkind: NodeList\nitems:\n"+
		"- metadata: {name: worker-e}\n"+
		"- metadata: {name: worker-b, namespace: other}\n"+
		"---\n"+
		"apiVersion: v1\nkind: Node\nmetadata: {}\n")
	snap, problems := mustLoad(t, path)
	// A file's own problems come first, then the duplicates across files.
	checkProblems(t, problems, path, []int{3, 4, 6, 5}, []string{
		`Node Worker_C: metadata.name "Worker_C"`,
		`Node worker-d: unknown field "spec.unschedulabel"`,
		"Node (no name): metadata.name is required",
		"List item 2: Node worker-b: duplicate ignored, " + path + " doc 1 defines it first",
	})
	want := []source.Node{
		{Name: "worker-a", Ready: true, Draining: true},
		{Name: "worker-b", Ready: true},
		{Name: "worker-e", Ready: true},
	}
	if !slices.Equal(snap.Nodes, want) {
		t.Errorf("nodes = %+v, want %+v", snap.Nodes, want)
	}
	if len(snap.Services)+len(snap.Ingresses) != 0 {
		t.Errorf("a Node became something else: %+v", snap)
	}
}

// A Node of another version is the user meaning pier to read it.
func TestLoadNodeWrongVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "node.yaml")
	writeFile(t, path, "apiVersion: v2\nkind: Node\nmetadata: {name: a}\n---\n"+
		"apiVersion: v1\nkind: Nod\nmetadata: {name: b}\n")
	snap, problems := mustLoad(t, path)
	checkProblems(t, problems, path, []int{1, 2}, []string{"Node a: v2 is not supported, use v1", "Nod default/b: unknown kind in v1"})
	if len(snap.Nodes) != 0 {
		t.Errorf("nodes = %+v", snap.Nodes)
	}
}

// A large document of a kind pier ignores is skipped before it is
// converted (an 8 MiB ConfigMap, the limit of a file, once cost ~310 MB).
func TestLoadSkipsLargeIgnoredKinds(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap # big\nmetadata:\n  name: big\ndata:\n")
	for i := 0; b.Len() < 7<<20; i++ {
		fmt.Fprintf(&b, "  key%d: %s\n", i, strings.Repeat("x", 1000))
	}
	b.WriteString("---\n" + `apiVersion: networking.k8s.io/v1beta1
kind: Ingress
metadata:
  name: old
`)
	if err := os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, problems, err := Load([]string{dir})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("loading a 7 MiB ignored document allocated %d MiB, want under 32 (84 before the peek)", got>>20)
	}
	// The peek decides nothing about kinds pier reads: a wrong version of
	// one is still reported.
	if len(problems) != 1 || !strings.Contains(problems[0].Message, "is not supported") {
		t.Errorf("problems %v, want the v1beta1 Ingress reported", problems)
	}
}

func TestPeekHeader(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want header
		ok   bool
	}{
		{"apiVersion: v1\nkind: ConfigMap\n", header{APIVersion: "v1", Kind: "ConfigMap"}, true},
		{"# c\nkind: Foo # note\napiVersion: x.io/v1\n", header{APIVersion: "x.io/v1", Kind: "Foo"}, true},
		{"kind: \"ConfigMap\"\napiVersion: v1\n", header{}, false},
		{"kind: A\nkind: B\napiVersion: v1\n", header{}, false},
		{"{kind: A, apiVersion: v1}\n", header{}, false},
		{"- kind: A\napiVersion: v1\nkind: B\n", header{}, false},
		{"apiVersion: v1\n", header{}, false},
		{"kind: &a A\napiVersion: v1\n", header{}, false},
	} {
		got, ok := peekHeader([]byte(tc.doc))
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("peekHeader(%q) = %+v, %v; want %+v, %v", tc.doc, got, ok, tc.want, tc.ok)
		}
	}
}

// A FIFO swapped in after the scan is refused at once instead of blocking
// the loader.
func TestReadLimitedRefusesFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := readLimited(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("reading a FIFO: %v, want it refused as not a regular file", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked the loader")
	}
}

// ConfigMaps: only those an Ingress names in custom-headers (of its own
// namespace) reach the snapshot; data is decoded strictly.
func TestLoadKeepsNamedConfigMaps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.yaml")
	writeFile(t, path, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: site
  namespace: web
  annotations:
    nginx.ingress.kubernetes.io/custom-headers: security
spec:
  defaultBackend:
    service: {name: site, port: {number: 80}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: security, namespace: web}
data:
  X-Frame-Options: DENY
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: web}
data: {a: b}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: security, namespace: other}
data: {a: b}
`)
	snap, problems := mustLoad(t, path)
	if len(problems) != 0 {
		t.Fatalf("problems %v", problems)
	}
	if len(snap.ConfigMaps) != 1 || snap.ConfigMap("web", "security") == nil || snap.ConfigMaps[0].Data["X-Frame-Options"] != "DENY" {
		t.Errorf("config maps %+v", snap.ConfigMaps)
	}
}
