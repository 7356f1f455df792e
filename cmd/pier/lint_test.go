package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/goldenfile"
)

// lintCorpusFlags lint the corpus of cmd/pier/testdata/lint, whose
// Ingresses name the classes nginx and pier or none, as pier's, without
// HAProxy: the goldens do not depend on the machine's HAProxy (test/corpus
// checks with it).
var lintCorpusFlags = []string{"--classless-ingresses", "--ingress-class", "nginx", "--ingress-class", "pier", "--haproxy="}

// TestLintCorpus runs pier lint on a small corpus of Ingresses in the
// style of real ingress-nginx users and compares its outputs (one line per
// Ingress, -v, JSON) with their expected reports; a refused Ingress makes
// it exit 1.
func TestLintCorpus(t *testing.T) {
	corpus := filepath.Join("testdata", "lint", "corpus")
	for _, tc := range []struct {
		golden string
		args   []string
	}{{"expected.txt", nil}, {"expected-details.txt", []string{"-v"}}, {"expected.json", []string{"-o", "json"}}} {
		var stdout, stderr bytes.Buffer
		args := append(append([]string{"lint", "-f", corpus}, lintCorpusFlags...), tc.args...)
		code := run(args, &stdout, &stderr)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1 (the corpus has refused Ingresses); stderr %s", tc.args, code, stderr.String())
		}
		goldenfile.Check(t, filepath.Join("testdata", "lint", tc.golden), stdout.Bytes(), "go test ./cmd/pier -run TestLintCorpus")
		if strings.HasSuffix(tc.golden, ".json") && !json.Valid(stdout.Bytes()) {
			t.Error("-o json is not JSON")
		}
	}
}

// lintDir writes docs into a folder as one file and runs pier lint on it
// with args; it returns the exit code and stdout.
func lintDir(t *testing.T, docs string, args ...string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(append([]string{"lint", "-f", dir}, args...), &stdout, &stderr)
	if stderr.Len() > 0 {
		t.Logf("stderr: %s", stderr.String())
	}
	return code, stdout.String()
}

const lintClass = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: pier}
spec: {controller: pier.dev/ingress-controller}
`

// lintIngress is an Ingress of class pier with annotations ann (YAML
// lines) and one rule for host.
func lintIngress(ns, name, host, ann string) string {
	return fmt.Sprintf(`---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: %s
  annotations: {%s}
spec:
  ingressClassName: pier
  rules:
    - host: %s
      http: {paths: [{path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: %s}
spec: {ports: [{name: http, port: 80}]}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-1, namespace: %s, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints: [{addresses: ["10.0.0.1"], conditions: {ready: true}}]
`, name, ns, ann, host, ns, ns)
}

// TestLintServesExitsZero: an Ingress pier serves as written gets the
// verdict "serves" and exit 0.
func TestLintServesExitsZero(t *testing.T) {
	code, out := lintDir(t, lintClass+lintIngress("shop", "ok", "ok.example", `nginx.ingress.kubernetes.io/force-ssl-redirect: "false"`), "--haproxy=")
	if code != 0 || !strings.Contains(out, "shop/ok  serves\n") ||
		!strings.Contains(out, "1 Ingress: 1 serve, 0 serve with differences, 0 refused, 0 not pier's") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

// TestLintSnippets: a snippet refuses the Ingress with the typed
// alternative; --ignore-snippets serves it with the snippet ignored.
func TestLintSnippets(t *testing.T) {
	docs := lintClass + lintIngress("shop", "snip", "snip.example", `nginx.ingress.kubernetes.io/configuration-snippet: "more_set_headers \"X-Frame-Options: DENY\";"`)
	code, out := lintDir(t, docs, "--haproxy=")
	if code != 1 || !strings.Contains(out, "shop/snip  refused  SnippetRefused: ") ||
		!strings.Contains(out, "for more_set_headers use pier.dev/response-headers") {
		t.Errorf("default: exit %d:\n%s", code, out)
	}
	code, out = lintDir(t, docs, "--haproxy=", "--ignore-snippets", "-v")
	if code != 0 || !strings.Contains(out, "shop/snip  serves with differences") || !strings.Contains(out, "ignored (--ignore-snippets)") {
		t.Errorf("--ignore-snippets: exit %d:\n%s", code, out)
	}
}

// TestLintHostSplit: one host in Ingresses of two namespaces is served
// from two addresses; lint says how to group them, and grouped and
// shared it is one load balancer.
func TestLintHostSplit(t *testing.T) {
	split := lintClass + lintIngress("team-a", "a", "shop.example", "") + lintIngress("team-b", "b", "shop.example", "")
	code, out := lintDir(t, split, "--haproxy=")
	want := "host shop.example is spread over 2 load balancers (team-a/a, team-b/b), each with its own address; with ingress-nginx one address answers for the class: " +
		"to serve it from one address, annotate each of its Ingresses with pier.dev/load-balancer: shop and start pier with --shared-load-balancer shop=team-a,team-b"
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "team-a/a  serves with differences") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	grouped := lintClass + lintIngress("team-a", "a", "shop.example", "pier.dev/load-balancer: shop") +
		lintIngress("team-b", "b", "shop.example", "pier.dev/load-balancer: shop")
	if _, out := lintDir(t, grouped, "--haproxy=", "--shared-load-balancer", "shop=team-a,team-b"); strings.Contains(out, "spread over") ||
		!strings.Contains(out, "team-a/a  serves\n") {
		t.Errorf("grouped and shared:\n%s", out)
	}
}

// TestLintHAProxyCheck: a configuration HAProxy refuses makes the
// Ingress refused, as its load balancer would be in ERROR; without
// HAProxy the report says no check ran.
func TestLintHAProxyCheck(t *testing.T) {
	real, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("needs haproxy (hack/deps.sh installs it)")
	}
	docs := lintClass + lintIngress("shop", "web", "web.example", "")
	code, out := lintDir(t, docs, "--haproxy", real)
	if code != 0 || !strings.Contains(out, "haproxy -c run with "+real) || !strings.Contains(out, "shop/web  serves\n") {
		t.Errorf("real haproxy: exit %d:\n%s", code, out)
	}
	refusing := filepath.Join(t.TempDir(), "haproxy")
	script := "#!/bin/sh\nif [ \"$1\" = \"-c\" ]; then echo '[ALERT] (test) configuration refused' >&2; exit 1; fi\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(refusing, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	code, out = lintDir(t, docs, "--haproxy", refusing)
	if code != 1 || !strings.Contains(out, "shop/web  refused  its load balancer shop/web would be in ERROR, serving nothing: ") ||
		!strings.Contains(out, "(test) configuration refused") {
		t.Errorf("refusing haproxy: exit %d:\n%s", code, out)
	}
	code, out = lintDir(t, docs, "--haproxy", filepath.Join(t.TempDir(), "none"))
	if code != 0 || !strings.Contains(out, "haproxy -c not run: ") || !strings.Contains(out, "not found") {
		t.Errorf("missing haproxy: exit %d:\n%s", code, out)
	}
}

// TestLintOldIngressVersions: an Ingress of a version pier does not read
// is reported as a document not read and makes lint exit 1, whichever
// group it names; extensions/v1beta1 used to be skipped in silence with
// exit 0.
func TestLintOldIngressVersions(t *testing.T) {
	for _, apiVersion := range []string{"networking.k8s.io/v1beta1", "extensions/v1beta1"} {
		doc := "apiVersion: " + apiVersion + "\nkind: Ingress\nmetadata:\n  name: old\nspec:\n  backend:\n    serviceName: web\n    servicePort: 80\n"
		code, out := lintDir(t, doc, "--haproxy=")
		want := "Ingress default/old: " + apiVersion + " is not supported, use networking.k8s.io/v1"
		if code != 1 || !strings.Contains(out, "not read: ") || !strings.Contains(out, want) || !strings.Contains(out, "; 1 document not read") {
			t.Errorf("%s: exit %d, output %q; want exit 1 and %q", apiVersion, code, out, want)
		}
	}
}

// TestLintEscapesNames: a name from a file with a terminal escape is
// printed escaped.
func TestLintEscapesNames(t *testing.T) {
	_, out := lintDir(t, lintClass+strings.Replace(lintIngress("shop", "evil", "e.example", ""), "name: evil", "name: \"evil\\e[31m\"", 1), "--haproxy=")
	if strings.Contains(out, "\x1b") || !strings.Contains(out, `evil\x1b[31m`) {
		t.Errorf("%q", out)
	}
}

// TestIgnoreSnippetsFlag: pier run, the controller and lint take
// --ignore-snippets, with help that says what it opens.
func TestIgnoreSnippetsFlag(t *testing.T) {
	for _, cmd := range []string{"run", "controller", "lint"} {
		var stdout, stderr bytes.Buffer
		run([]string{cmd, "-h"}, &stdout, &stderr)
		if help := stderr.String(); !strings.Contains(help, "-ignore-snippets") || !strings.Contains(help, "a dropped snippet may have been a rule") {
			t.Errorf("pier %s -h lacks --ignore-snippets:\n%s", cmd, help)
		}
	}
}

// TestLintEscapesControlBytes: an Ingress whose name and annotation key
// carry terminal escape sequences (clear the screen, set the window
// title, a C1 CSI, a bidi override), and a broken file whose name
// carries one. pier lint's text report, its JSON and its problem lines
// must show them escaped, never raw.
func TestLintEscapesControlBytes(t *testing.T) {
	dir := t.TempDir()
	ingress := func(name, annotations string) string {
		return "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: " + name + "\n" +
			"  annotations:\n" + annotations +
			"spec:\n  defaultBackend: {service: {name: s, port: {number: 80}}}\n"
	}
	doc := ingress("evil", "    \"nginx.ingress.kubernetes.io/\\e[2Jx\\u202e\": \"1\"\n"+
		"    \"pier.dev/\\e]0;pwned\\a\\u009b2J\": \"1\"\n"+
		"    nginx.ingress.kubernetes.io/ssl-redirect: \"\\e[31mtrue\"\n") +
		"---\n" + ingress("\"evil\\e]0;pwned\\a\\u009b2J\"", "    pier.dev/x: \"1\"\n")
	if err := os.WriteFile(filepath.Join(dir, "ing.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad\x1b[2J.yaml"), []byte("kind: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	raw := []string{"\x1b", "\x07", "\u009b", "\u202e"}
	for _, format := range []string{"text", "json"} {
		var stdout, stderr bytes.Buffer
		run([]string{"lint", "--classless-ingresses", "-v", "-f", dir, "-o", format}, &stdout, &stderr)
		for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
			for _, r := range raw {
				if strings.Contains(out, r) {
					t.Errorf("-o %s: %s carries %q raw:\n%q", format, name, r, out)
				}
			}
		}
		if all := stdout.String() + stderr.String(); !strings.Contains(all, "evil") || !strings.Contains(all, "bad") || !strings.Contains(all, `\x1b[2Jx`) {
			t.Fatalf("-o %s: the Ingress or the broken file is not reported:\n%s\n%s", format, stdout.String(), stderr.String())
		}
		t.Logf("-o %s:\n%s%s", format, stdout.String(), stderr.String())
	}
}
