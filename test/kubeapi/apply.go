package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// FieldManager is the server-side-apply manager name of objects tests apply.
const FieldManager = "pier-test"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// RepoPath joins elem to the repository root, for tests that read deploy/.
func RepoPath(elem ...string) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{root}, elem...)...), nil
}

// ReadManifests decodes every document of the YAML (or JSON) files.
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read manifest: %w", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("decode %s: %w", path, err)
			}
			if obj == nil {
				continue // an empty document between two ---
			}
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
	return objs, nil
}

// Apply server-side-applies objs in order with strict field validation (a
// misspelt field fails instead of being dropped), waiting for each CRD to be
// served before the next object. With dryRun nothing is stored, but the
// objects still go through validation and admission.
func Apply(ctx context.Context, cfg *rest.Config, dryRun bool, objs ...*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	opts := metav1.PatchOptions{FieldManager: FieldManager, Force: ptr(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, obj := range objs {
		if err := applyOne(ctx, client, mapper, obj, opts); err != nil {
			return err
		}
		if obj.GetKind() == "CustomResourceDefinition" && !dryRun {
			if err := WaitCRD(ctx, client, obj.GetName()); err != nil {
				return err
			}
			mapper.Reset() // the new kind is in discovery now
		}
	}
	return nil
}

// ApplyFiles reads the manifests in paths and applies them for real.
func ApplyFiles(ctx context.Context, cfg *rest.Config, paths ...string) error {
	objs, err := ReadManifests(paths...)
	if err != nil {
		return err
	}
	return Apply(ctx, cfg, false, objs...)
}

func applyOne(ctx context.Context, client dynamic.Interface, mapper meta.RESTMapper,
	obj *unstructured.Unstructured, opts metav1.PatchOptions) error {
	gvk := obj.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, obj.GetName())
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	var ri dynamic.ResourceInterface = client.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = metav1.NamespaceDefault
		}
		ri = client.Resource(m.Resource).Namespace(ns)
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return fmt.Errorf("apply %s: %w", what, err)
	}
	return nil
}

// WaitCRD waits until the CRD name is Established (its resource is served).
func WaitCRD(ctx context.Context, client dynamic.Interface, name string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		crd, err := client.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err == nil && established(crd) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established (last error %v): %w", name, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

// GatewayCRDFiles are the standard-channel Gateway API CRDs (GatewayClass,
// Gateway, HTTPRoute, ReferenceGrant) of the sigs.k8s.io/gateway-api
// version the module under test requires, read from the module cache: the
// repository keeps no copy.
func GatewayCRDFiles() ([]string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m sigs.k8s.io/gateway-api: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	var files []string
	for _, kind := range []string{"gatewayclasses", "gateways", "httproutes", "referencegrants"} {
		files = append(files, filepath.Join(dir, "gateway.networking.k8s.io_"+kind+".yaml"))
	}
	return files, nil
}
