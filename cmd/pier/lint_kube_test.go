package main

import (
	"bytes"
	"os"
	"path/filepath"
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
	for _, ns := range []string{"shop", "legacy", "web"} {
		_, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	corpus, _ := filepath.Glob(filepath.Join("testdata", "lint", "corpus", "*.yaml"))
	if err := kubeapi.ApplyFiles(t.Context(), srv.Config(), corpus...); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"lint", "--kubeconfig", srv.Kubeconfig()}, &stdout, &stderr); code != 1 {
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
