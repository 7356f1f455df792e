package helm

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// generated are the files hack/gen-deploy.sh writes into deploy/.
var generated = []string{"rbac.yaml", "controller.yaml", "agent.yaml", "ingressclass.yaml", "metrics.yaml"}

// TestHelmDeployMatchesChart: deploy/ (kubectl apply -k deploy/) is what
// hack/gen-deploy.sh renders from the chart today, the chart's crds/ holds
// deploy/crd-loadbalancers.yaml byte for byte, and kustomization.yaml lists
// every file.
func TestHelmDeployMatchesChart(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "hack", "gen-deploy.sh"), out)
	cmd.Env = append(os.Environ(), "PIER_HELM="+helmBin(t), "HELM_CONFIG_HOME="+out+"/.helm",
		"HELM_CACHE_HOME="+out+"/.helm", "HELM_DATA_HOME="+out+"/.helm")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("hack/gen-deploy.sh: %v\n%s", err, stderr.String())
	}
	deploy := filepath.Join(root, "deploy")
	for _, f := range generated {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(deploy, f))
		if err != nil {
			t.Errorf("deploy/%s: %v; run hack/gen-deploy.sh", f, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("deploy/%s differs from the chart's rendering; edit the chart (deploy/chart/pier), not deploy/, and run hack/gen-deploy.sh\n%s",
				f, firstDiff(got, want))
		}
	}

	crd, err := os.ReadFile(filepath.Join(deploy, "crd-loadbalancers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	chartCRD, err := os.ReadFile(filepath.Join(chartDir(t), "crds", "crd-loadbalancers.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(crd, chartCRD) {
		t.Error("deploy/chart/pier/crds/crd-loadbalancers.yaml differs from deploy/crd-loadbalancers.yaml (the source); run hack/gen-deploy.sh")
	}
	dash, err := os.ReadFile(filepath.Join(deploy, "grafana", "pier-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if chartDash, err := os.ReadFile(filepath.Join(chartDir(t), "dashboards", "pier-dashboard.json")); err != nil || !bytes.Equal(dash, chartDash) {
		t.Errorf("deploy/chart/pier/dashboards/pier-dashboard.json differs from deploy/grafana/pier-dashboard.json (the source): %v; run hack/gen-deploy.sh", err)
	}
	if crds, _ := filepath.Glob(filepath.Join(chartDir(t), "crds", "*")); len(crds) != 1 {
		t.Errorf("the chart's crds/ holds %v, want crd-loadbalancers.yaml alone", crds)
	}

	var k struct {
		Resources []string `json:"resources"`
	}
	data, err := os.ReadFile(filepath.Join(deploy, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	want := append([]string{"crd-loadbalancers.yaml"}, generated...)
	got := slices.Clone(k.Resources)
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deploy/kustomization.yaml resources %v, want %v", k.Resources, want)
	}
	files, _ := filepath.Glob(filepath.Join(deploy, "*.yaml"))
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" && !slices.Contains(want, b) {
			t.Errorf("deploy/%s is neither generated nor listed in kustomization.yaml", b)
		}
	}
}

// firstDiff shows the first differing line of two files.
func firstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  deploy/: " + gl + "\n  chart:   " + wl
		}
	}
	return ""
}

// TestHelmReadmeListsValues: the chart's README has a row for every value
// of values.yaml (its leaves; maps are descended into unless empty).
func TestHelmReadmeListsValues(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(chartDir(t), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(chartDir(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && !freeForm[key] {
				walk(key+".", sub)
				continue
			}
			keys = append(keys, key)
		}
	}
	walk("", values)
	sort.Strings(keys)
	for _, k := range keys {
		if !bytes.Contains(readme, []byte("| `"+k+"` |")) {
			t.Errorf("deploy/chart/pier/README.md has no row for `%s`", k)
		}
	}
}

// freeForm values are Kubernetes objects passed through with toYaml: one
// row each.
var freeForm = map[string]bool{"controller.resources": true, "agent.resources": true,
	"controller.probes.startup": true, "controller.probes.liveness": true, "controller.probes.readiness": true,
	"agent.probes.startup": true, "agent.probes.liveness": true, "agent.probes.readiness": true}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
