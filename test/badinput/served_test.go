package badinput

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/fixture"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source/files"
	"pier.dev/pier/test/harness"
)

// servedMarkers must not reach HAProxy files even when the attacker's
// Ingress is served. They include "evil", the attacker's namespace:
// names are never rendered, identifiers are pier's own (UUIDs, never a user's name).
var servedMarkers = append([]string{"lua-load"}, globalMarkers...)

// attacker is the default served attacker: ns/evil, host
// attacker.example, /ok to the namespace's app Service, plus any paths.
func (b *bench) attacker(ns string, paths ...networkingv1.HTTPIngressPath) (*networkingv1.Ingress, *attack) {
	ing := ingress(ns, "evil", "attacker.example", "/ok")
	ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, paths...)
	return ing, &attack{ns: ns, objs: append([]runtime.Object{ing}, service(ns, "app", b.attackerPort)...)}
}

// literalPaths are the '$' and regex payloads the path allow-list accepts
// ('$', '*', '(', ')' and ',' are RFC 3986 pchars): pier must serve them
// as literal prefixes, never as a regex or an environment variable.
var literalPaths = []struct {
	id, path   string
	hit, miss  []string
	missIsHome bool // also miss "/" + the value $HOME would expand to
}{
	{id: "dollar", path: "/$HOME", hit: []string{"/$HOME", "/$HOME/x"}, miss: []string{"/", "/HOME"}, missIsHome: true},
	{id: "regex-char", path: "/a.*", hit: []string{"/a.*", "/a.*/x"}, miss: []string{"/abc", "/a", "/a.x"}},
	{id: "regex-char", path: "/a)", hit: []string{"/a)"}, miss: []string{"/a"}},
	{id: "regex-char", path: "/a,b", hit: []string{"/a,b"}, miss: []string{"/a", "/b"}},
}

func (b *bench) runLiteralPaths(t *testing.T) {
	for i, lp := range literalPaths {
		t.Run(lp.id+"-literal/"+fmt.Sprintf("%02d_%q", i+1, lp.path), func(t *testing.T) {
			ns := fmt.Sprintf("evil-lit-%d", i)
			ing, a := b.attacker(ns)
			ing.Spec.Rules[0].HTTP.Paths[0].Path = lp.path
			before := b.reloads()
			got, vip := b.launchServed(t, a, "evil")
			if rb := got.Spec.Rules[0].HTTP.Paths[0].Path; rb != lp.path {
				t.Fatalf("pier read path %q, wrote %q", rb, lp.path)
			}
			checkProblemText(t, got.Problems, lp.path)
			if len(got.Problems) != 0 {
				t.Errorf("a valid path got problems: %s", problemList(got.Problems))
			}
			for _, p := range lp.hit {
				b.expectRoute(t, vip, "attacker.example", p, attackerEcho)
			}
			for _, p := range lp.miss {
				b.expectRoute(t, vip, "attacker.example", p, "404")
			}
			if lp.missIsHome {
				// "/$HOME" expanded would be "//<home>", a path with an
				// empty segment, which pier refuses before any routing.
				b.expectRoute(t, vip, "attacker.example", "/"+b.home, "400")
			}
			b.checkIsolated(t, before, 1, servedMarkers)
		})
	}
}

// runSnippets: snippet keys refuse the Ingress (served without
// them, what they did would be lost) and config-style keys are ignored
// with a Warning; their text is never rendered either way. The third key
// adds a bidi character, which an API server would refuse in a key but
// a manifest file carries.
func (b *bench) runSnippets(t *testing.T) {
	keys := []string{"pier.dev/server-snippet", "pier.dev/config-x", "pier.dev/config-\u202ex"}
	for i, key := range keys {
		t.Run(fmt.Sprintf("%02d_%q", i+1, key), func(t *testing.T) {
			ns := fmt.Sprintf("evil-snip-%d", i)
			ing, a := b.attacker(ns)
			ing.Annotations = map[string]string{key: "http-request return status 200 string pwned\nglobal\n  lua-load /tmp/pwned.lua"}
			before := b.reloads()
			if strings.Contains(key, "snippet") {
				got := b.launch(t, a, "evil")
				if pr := findProblem(got.Problems, model.SeverityError, "SnippetRefused"); pr == nil {
					t.Errorf("want a SnippetRefused error; problems: %s", problemList(got.Problems))
				}
				checkProblemText(t, got.Problems, key)
				checkNoAddress(t, got)
				b.checkIsolated(t, before, 0, servedMarkers)
				return
			}
			got, vip := b.launchServed(t, a, "evil")
			pr := findProblem(got.Problems, model.SeverityWarning, "IgnoredAnnotation")
			if pr == nil || !strings.Contains(pr.Message, "snippet") {
				t.Errorf("want an IgnoredAnnotation warning about snippets; problems: %s", problemList(got.Problems))
			}
			checkProblemText(t, got.Problems, key)
			b.expectRoute(t, vip, "attacker.example", "/ok", attackerEcho)
			b.checkIsolated(t, before, 1, servedMarkers)
		})
	}
}

// runAnnotationSizes sends oversized annotations pier does not own: 1 MiB in
// one value, and 500 annotations totalling 300 KB, over the API server's
// 256 KiB cap, which `pier run` has no API server to enforce. The row's
// outcome: refused or ignored with a reason, in bounded time and memory.
func (b *bench) runAnnotationSizes(t *testing.T) {
	many := map[string]string{}
	for i := range 500 {
		many[fmt.Sprintf("example.com/k-%03d", i)] = "pwned" + strings.Repeat("x", 595)
	}
	cases := []struct {
		name string
		ann  map[string]string
	}{
		{"1MiB_value", map[string]string{"example.com/blob": "pwned" + oneMiB}},
		{"500_annotations_300KB", many},
	}
	t.Run("9MiB_file", b.runOversizedFile)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-size-%d", i)
			ing, a := b.attacker(ns)
			ing.Annotations = c.ann
			before := b.reloads()
			start := time.Now()
			got := b.launch(t, a, "evil")
			took := time.Since(start)
			rss := b.p.Metric("process_resident_memory_bytes")
			t.Logf("verdict after %s, pier RSS %.0f MiB; problems: %s", took, rss/(1<<20), problemList(got.Problems))
			if took > 5*time.Second || rss > 512<<20 {
				t.Errorf("verdict took %s with RSS %.0f MiB: want < 5s and < 512 MiB", took, rss/(1<<20))
			}
			checkProblemText(t, got.Problems, "")
			newLBs := b.annotationSizeVerdict(t, got)
			b.checkIsolated(t, before, newLBs, servedMarkers)
		})
	}
}

// runOversizedFile writes annotations so large that their file passes the
// manifest reader's cap (files.MaxFileSize, 8 MiB): the file is refused before it is decoded,
// so no Ingress exists to carry a problem; pier logs the file and counts
// it in pier_source_problems. In a cluster the API server's request
// limit (3 MiB) plays this part.
func (b *bench) runOversizedFile(t *testing.T) {
	ns := "evil-size-file"
	ing, a := b.attacker(ns)
	ing.Annotations = map[string]string{"example.com/blob": "pwned" + strings.Repeat("a", files.MaxFileSize)}
	before := b.reloads()
	a.files = []string{filepath.Join(b.manifests, "attack-"+ns+".json")}
	start := time.Now()
	harness.WriteFile(t, a.files[0], string(list(t, a.objs...)))
	t.Cleanup(func() { b.withdraw(t, a) })
	harness.WaitFor(t, 10*time.Second, "the file refused", func() bool { return b.p.Metric("pier_source_problems") == 1 })
	rss := b.p.Metric("process_resident_memory_bytes")
	t.Logf("refused after %s, pier RSS %.0f MiB", time.Since(start).Round(time.Millisecond), rss/(1<<20))
	if log, _ := os.ReadFile(b.p.LogPath); !strings.Contains(string(log), "MaxFileSize") {
		t.Errorf("pier's log does not say why the file was refused")
	}
	if _, err := b.p.Ingress(ns, "evil"); err == nil {
		t.Errorf("pier read an Ingress from a file over %d bytes", files.MaxFileSize)
	}
	if rss > 512<<20 {
		t.Errorf("pier RSS %.0f MiB, want < 512 MiB", rss/(1<<20))
	}
	b.checkIsolated(t, before, 0, servedMarkers)
}

// annotationSizeVerdict wants a problem naming the annotations' size; it
// returns how many load balancers the verdict starts.
func (b *bench) annotationSizeVerdict(t *testing.T, got *api.IngressResponse) int {
	t.Helper()
	var reason *model.Problem
	refused := false
	for i, pr := range got.Problems {
		refused = refused || pr.Severity == model.SeverityError
		if strings.Contains(pr.Field+pr.Message, "annotation") &&
			(strings.Contains(pr.Message, "size") || strings.Contains(pr.Message, "bytes") || strings.Contains(pr.Message, "limit")) {
			reason = &got.Problems[i]
		}
	}
	if reason == nil {
		t.Errorf("served with no reason given: pier has no limit on annotation size (the API server caps all annotations at 256 KiB)")
	}
	if refused {
		checkNoAddress(t, got)
		return 0
	}
	b.awaitServed(t, got.Namespace, got.Name)
	return 1
}

// runBadBackends: each bad backend costs its own route a 503 and
// nothing else: /ok on the same Ingress and the victim keep working.
func (b *bench) runBadBackends(t *testing.T) {
	cases := []struct {
		name, reason string
		backend      networkingv1.IngressServiceBackend
		extra        []runtime.Object
	}{
		{"no_service", "ServiceNotFound", svcBackend("nope", 80), nil},
		{"no_port", "ServicePortNotFound", svcBackend("app", 8080), nil},
		{"external_name_own_vip", "UnsupportedBackend", svcBackend("ext", 80), nil},
		{"port_0", "", svcBackend("app", 0), nil},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := fmt.Sprintf("evil-backend-%d", i)
			bad := fixture.Path("/bad", pathPrefix, c.backend.Name, c.backend.Port.Number)
			_, a := b.attacker(ns, bad)
			if c.backend.Name == "ext" {
				a.objs = append(a.objs, externalName(ns, "ext", b.vip))
			}
			before := b.reloads()
			if got := b.launch(t, a, "evil"); hasError(got.Problems) {
				t.Errorf("the whole Ingress was refused for one bad backend; want only /bad to get 503; problems: %s",
					problemList(got.Problems))
				b.checkIsolated(t, before, 0, servedMarkers)
				return
			}
			got, vip := b.awaitServed(t, ns, "evil")
			if c.reason != "" && findProblem(got.Problems, model.SeverityWarning, c.reason) == nil {
				t.Errorf("want a %s warning; problems: %s", c.reason, problemList(got.Problems))
			}
			checkProblemText(t, got.Problems, "")
			b.expectRoute(t, vip, "attacker.example", "/bad", "503")
			b.expectRoute(t, vip, "attacker.example", "/ok", attackerEcho)
			b.checkIsolated(t, before, 1, servedMarkers)
		})
	}
}

func svcBackend(name string, port int32) networkingv1.IngressServiceBackend {
	return networkingv1.IngressServiceBackend{Name: name, Port: networkingv1.ServiceBackendPort{Number: port}}
}

func externalName(ns, name, target string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: target,
			Ports: []corev1.ServicePort{{Port: 80}}},
	}
}
