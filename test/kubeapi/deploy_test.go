package kubeapi

import (
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// TestDeployManifests: everything in deploy/ is accepted by a real API
// server with strict field validation (a misspelt field fails), the
// workloads pass admission (dry run: there are no nodes), and the RBAC
// rules grant each component what the design says and nothing of the rest.
func TestDeployManifests(t *testing.T) {
	srv := Shared(t)
	ctx := t.Context()
	var paths []string
	for _, f := range []string{"crd-loadbalancers.yaml", "rbac.yaml", "controller.yaml", "agent.yaml"} {
		p, err := RepoPath("deploy", f)
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if err := ApplyFiles(ctx, srv.Config(), paths[0], paths[1]); err != nil {
		t.Fatal(err)
	}
	workloads, err := ReadManifests(paths[2:]...)
	if err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, srv.Config(), true, workloads...); err != nil {
		t.Fatal(err)
	}
	checkAccess(t, srv)
}

type access struct {
	who                        string // controller or agent
	verb, group, resource, sub string
	ns                         string
	allowed                    bool
}

func checkAccess(t *testing.T, srv *Server) {
	cs := clientset(t, srv)
	for _, c := range []access{
		{"controller", "list", "networking.k8s.io", "ingresses", "", "", true},
		{"controller", "update", "networking.k8s.io", "ingresses", "status", "team-a", true},
		{"controller", "update", "networking.k8s.io", "ingresses", "", "team-a", false},
		{"controller", "watch", "discovery.k8s.io", "endpointslices", "", "", true},
		{"controller", "get", "", "secrets", "", "team-a", true},
		{"controller", "update", "", "secrets", "", "team-a", false},
		{"controller", "create", "", "events", "", "team-a", true},
		{"controller", "delete", "pier.dev", "loadbalancers", "", "", true},
		{"controller", "update", "pier.dev", "loadbalancers", "status", "", false},
		{"controller", "update", "coordination.k8s.io", "leases", "", "pier-system", true},
		{"controller", "update", "coordination.k8s.io", "leases", "", "kube-system", false},
		{"agent", "watch", "pier.dev", "loadbalancers", "", "", true},
		{"agent", "update", "pier.dev", "loadbalancers", "status", "", true},
		{"agent", "update", "pier.dev", "loadbalancers", "", "", false},
		{"agent", "create", "pier.dev", "loadbalancers", "", "", false},
		{"agent", "get", "", "secrets", "", "team-a", true},
		{"agent", "list", "", "nodes", "", "", true},
		{"agent", "list", "networking.k8s.io", "ingresses", "", "", false},
	} {
		name := fmt.Sprintf("%s %s %s/%s/%s in %q", c.who, c.verb, c.group, c.resource, c.sub, c.ns)
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:pier-system:pier-" + c.who,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:pier-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Namespace: c.ns,
			},
		}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.Status.Allowed != c.allowed {
			t.Errorf("%s: allowed = %v, want %v (%s)", name, got.Status.Allowed, c.allowed, got.Status.Reason)
		}
	}
}

// TestIngressCannotOwnLoadBalancer pins the fact behind two decisions:
// the CRD is cluster-scoped, and the store sets no ownerReference to the
// source Ingress. Kubernetes accepts such a reference, but the garbage
// collector treats a namespaced owner of a cluster-scoped object as
// unresolvable: it reports OwnerRefInvalidNamespace and never deletes the
// dependent. Deleting load balancers whose sources are gone is therefore
// the controller's job. If this test starts failing, Kubernetes changed.
func TestIngressCannotOwnLoadBalancer(t *testing.T) {
	srv := Shared(t)
	ctx := t.Context()
	crd, err := RepoPath("deploy", "crd-loadbalancers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := ApplyFiles(ctx, srv.Config(), crd); err != nil {
		t.Fatal(err)
	}
	if err := srv.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, srv)
	ing, err := cs.NetworkingV1().Ingresses("default").Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "svc", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lbs := dynamic.NewForConfigOrDie(srv.Config()).Resource(
		schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"})
	lb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pier.dev/v1alpha1", "kind": "LoadBalancer",
		"metadata": map[string]any{"name": "owned-by-ingress", "ownerReferences": []any{map[string]any{
			"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "name": ing.Name, "uid": string(ing.UID)}}},
		"spec": map[string]any{"provider": "haproxy"},
	}}
	if _, err := lbs.Create(ctx, lb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("the API server refused the reference (then the store could rely on that instead): %v", err)
	}
	if err := cs.NetworkingV1().Ingresses("default").Delete(ctx, ing.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "OwnerRefInvalidNamespace event", func() (bool, error) {
		evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.name=owned-by-ingress,reason=OwnerRefInvalidNamespace"})
		return err == nil && len(evs.Items) > 0, err
	})
	time.Sleep(2 * time.Second) // give a (changed) collector the chance to act anyway
	if _, err := lbs.Get(ctx, "owned-by-ingress", metav1.GetOptions{}); err != nil {
		t.Fatalf("the load balancer was garbage-collected after all: %v", err)
	}
}
