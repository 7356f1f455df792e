package helm

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/test/kubeapi"
)

// TestMain stops the API server TestHelmChartAppliesToAPIServer starts (the
// other tests need none).
func TestMain(m *testing.M) { kubeapi.Main(m, kubeapi.Options{}) }

// TestHelmChartAppliesToAPIServer: the rendering with every values file is
// accepted by a real kube-apiserver with strict field validation and passes
// admission (server-side dry run), the Gateway API CRDs installed for the
// GatewayClass. ServiceMonitors are left out: their CRD is the Prometheus
// Operator's. deploy/ itself is checked by test/kubeapi's
// TestDeployManifests, RBAC included.
func TestHelmChartAppliesToAPIServer(t *testing.T) {
	srv := kubeapi.Shared(t)
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pier-system"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	crds := []string{filepath.Join(chartDir(t), "crds", "crd-loadbalancers.yaml")}
	gw, err := kubeapi.GatewayCRDFiles()
	if err != nil {
		t.Fatal(err)
	}
	if err := kubeapi.ApplyFiles(ctx, srv.Config(), append(crds, gw...)...); err != nil {
		t.Fatal(err)
	}
	for _, f := range ciValues(t) {
		t.Run(filepath.Base(f), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "rendered.yaml")
			writeFile(t, out, render(t, []string{f}))
			objs, err := kubeapi.ReadManifests(out)
			if err != nil {
				t.Fatal(err)
			}
			var keep []*unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() != "ServiceMonitor" {
					keep = append(keep, o)
				}
			}
			if err := kubeapi.Apply(ctx, srv.Config(), true, keep...); err != nil {
				t.Fatal(err)
			}
		})
	}
}
