package kubeapi

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	for _, w := range workloads {
		if w.GetKind() == "DaemonSet" {
			checkAgentToken(t, w)
		}
	}
}

// checkAgentToken: HAProxy's workers drop to an unprivileged user
// (--haproxy-user), which needs SETUID and SETGID, and must not be able
// to read the agent's service-account token: it is mounted by hand with
// mode 0400 instead of automounted with 0644.
func checkAgentToken(t *testing.T, ds *unstructured.Unstructured) {
	t.Helper()
	var d appsv1.DaemonSet
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(ds.Object, &d); err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("agent: the token is automounted (mode 0644, readable by HAProxy's workers)")
	}
	var mode int32 = -1
	for _, v := range spec.Volumes {
		if v.Projected != nil && v.Projected.DefaultMode != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					mode = *v.Projected.DefaultMode
				}
			}
		}
	}
	if mode != 0o400 {
		t.Errorf("agent: token volume mode %#o, want 0400", mode)
	}
	caps := map[corev1.Capability]bool{}
	for _, c := range spec.Containers[0].SecurityContext.Capabilities.Add {
		caps[c] = true
	}
	if !caps["SETUID"] || !caps["SETGID"] {
		t.Errorf("agent: capabilities %v lack SETUID/SETGID, which --haproxy-user needs", spec.Containers[0].SecurityContext.Capabilities.Add)
	}
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
		{"agent", "list", "", "secrets", "", "team-a", false},
		{"agent", "watch", "", "secrets", "", "", false},
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
// unresolvable (it may report OwnerRefInvalidNamespace) and never deletes
// the dependent. Deleting load balancers whose sources are gone is
// therefore the controller's job. Two controls show the collector was
// working on both the Ingress and the LoadBalancers: a ConfigMap owned by
// the same Ingress goes, and a LoadBalancer owned by a cluster-scoped
// IngressClass goes. If this test starts failing, Kubernetes changed.
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
	class, err := cs.NetworkingV1().IngressClasses().Create(ctx, &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "owner"},
		Spec:       networkingv1.IngressClassSpec{Controller: "pier.dev/ingress-controller"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ingRef := metav1.OwnerReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: ing.Name, UID: ing.UID}
	classRef := metav1.OwnerReference{APIVersion: "networking.k8s.io/v1", Kind: "IngressClass", Name: class.Name, UID: class.UID}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "owned-by-ingress", OwnerReferences: []metav1.OwnerReference{ingRef}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lbs := dynamic.NewForConfigOrDie(srv.Config()).Resource(
		schema.GroupVersionResource{Group: "pier.dev", Version: "v1alpha1", Resource: "loadbalancers"})
	createOwnedLB(t, lbs, "owned-by-ingress", ingRef)
	createOwnedLB(t, lbs, "owned-by-class", classRef)

	if err := cs.NetworkingV1().Ingresses("default").Delete(ctx, ing.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.NetworkingV1().IngressClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "controls garbage-collected", func() (bool, error) {
		_, cmErr := cs.CoreV1().ConfigMaps("default").Get(ctx, "owned-by-ingress", metav1.GetOptions{})
		_, lbErr := lbs.Get(ctx, "owned-by-class", metav1.GetOptions{})
		return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(lbErr), nil
	})
	time.Sleep(2 * time.Second) // the collector works its queue in parallel
	if _, err := lbs.Get(ctx, "owned-by-ingress", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Ingress's load balancer was garbage-collected after all: %v", err)
	}
}

func createOwnedLB(t *testing.T, lbs dynamic.ResourceInterface, name string, owner metav1.OwnerReference) {
	t.Helper()
	lb := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pier.dev/v1alpha1", "kind": "LoadBalancer",
		"metadata": map[string]any{"name": name, "ownerReferences": []any{map[string]any{
			"apiVersion": owner.APIVersion, "kind": owner.Kind, "name": owner.Name, "uid": string(owner.UID)}}},
		"spec": map[string]any{"provider": "haproxy"},
	}}
	if _, err := lbs.Create(t.Context(), lb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s (a refusal would be a fact to rely on instead): %v", name, err)
	}
}
