package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/test/kubeapi"
)

// The API server starts only for a test that asks for it (Shared).
func TestMain(m *testing.M) { kubeapi.Main(m, kubeapi.Options{}) }

// TestLintLiveCluster: pier lint --kubeconfig on a real API server holding
// the corpus prints the report the files give.
func TestLintLiveCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	srv := kubeapi.Shared(t)
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	corpus, _ := filepath.Glob(filepath.Join("testdata", "lint", "corpus", "*.yaml"))
	for _, ns := range corpusNamespaces(t, corpus) {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := kubeapi.ApplyFiles(t.Context(), srv.Config(), corpus...); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"lint", "--kubeconfig", srv.Kubeconfig()}, lintCorpusFlags...), &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1: %s", code, stderr.String())
	}
	want, err := os.ReadFile(filepath.Join("testdata", "lint", "expected.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stdout.Bytes(), want) {
		t.Errorf("live cluster report differs from the files' one:\n%s", stdout.String())
	}
	if code := run([]string{"lint", "--kubeconfig", srv.Kubeconfig(), "-f", "x"}, &stdout, &stderr); code != 2 {
		t.Errorf("both -f and --kubeconfig: exit %d, want 2", code)
	}
}

// corpusNamespaces lists the namespaces the corpus's objects live in, so
// that a new corpus file needs no change here.
func corpusNamespaces(t *testing.T, files []string) []string {
	t.Helper()
	seen := map[string]bool{}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range namespaceLine.FindAllSubmatch(b, -1) {
			if ns := string(m[1]); !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	return out
}

var namespaceLine = regexp.MustCompile(`(?m)^\s+namespace:\s*([a-z0-9-]+)\s*$`)
