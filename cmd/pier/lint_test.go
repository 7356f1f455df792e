package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pier.dev/pier/internal/goldenfile"
)

// TestLintCorpus runs pier lint on a small corpus of Ingresses in the
// style of real ingress-nginx users and compares both outputs with their
// expected reports; anything unsupported makes it exit 1.
func TestLintCorpus(t *testing.T) {
	corpus := filepath.Join("testdata", "lint", "corpus")
	for _, tc := range []struct{ golden, format string }{{"expected.txt", "text"}, {"expected.json", "json"}} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"lint", "-f", corpus, "-o", tc.format}, &stdout, &stderr)
		if code != 1 {
			t.Errorf("-o %s: exit %d, want 1 (the corpus has unsupported annotations); stderr %s", tc.format, code, stderr.String())
		}
		goldenfile.Check(t, filepath.Join("testdata", "lint", tc.golden), stdout.Bytes(), "go test ./cmd/pier -run TestLintCorpus")
		if tc.format == "json" && !json.Valid(stdout.Bytes()) {
			t.Error("-o json is not JSON")
		}
	}
}

// TestLintCleanExitsZero: only supported annotations, exit 0.
func TestLintCleanExitsZero(t *testing.T) {
	dir := t.TempDir()
	doc := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ok
  annotations:
    nginx.ingress.kubernetes.io/force-ssl-redirect: "false"
spec:
  rules:
    - host: ok.example
      http:
        paths:
          - path: /
            pathType: Prefix
            backend:
              service: {name: ok, port: {number: 80}}
`
	if err := os.WriteFile(filepath.Join(dir, "ok.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"lint", "-f", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	if !bytes.Contains(stdout.Bytes(), []byte("1 Ingresses, 1 annotations: 1 supported, 0 supported with a difference, 0 unsupported")) {
		t.Errorf("summary: %s", stdout.String())
	}
}

// TestLintOldIngressVersions: an Ingress of a version pier does not read
// is reported on stderr and makes lint exit 1, whichever group it names;
// extensions/v1beta1 used to be skipped in silence with exit 0.
func TestLintOldIngressVersions(t *testing.T) {
	for _, apiVersion := range []string{"networking.k8s.io/v1beta1", "extensions/v1beta1"} {
		dir := t.TempDir()
		doc := "apiVersion: " + apiVersion + "\nkind: Ingress\nmetadata:\n  name: old\nspec:\n  backend:\n    serviceName: web\n    servicePort: 80\n"
		if err := os.WriteFile(filepath.Join(dir, "old.yaml"), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		code := run([]string{"lint", "-f", dir}, &stdout, &stderr)
		want := "Ingress default/old: " + apiVersion + " is not supported, use networking.k8s.io/v1"
		if code != 1 || !bytes.Contains(stderr.Bytes(), []byte(want)) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and %q", apiVersion, code, stderr.String(), want)
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
		run([]string{"lint", "-f", dir, "-o", format}, &stdout, &stderr)
		for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
			for _, r := range raw {
				if strings.Contains(out, r) {
					t.Errorf("-o %s: %s carries %q raw:\n%q", format, name, r, out)
				}
			}
		}
		if !strings.Contains(stdout.String(), "evil") || !strings.Contains(stderr.String(), "bad") {
			t.Fatalf("-o %s: the Ingress or the broken file is not reported:\n%s\n%s", format, stdout.String(), stderr.String())
		}
		t.Logf("-o %s:\n%s%s", format, stdout.String(), stderr.String())
	}
}
