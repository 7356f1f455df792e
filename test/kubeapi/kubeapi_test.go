package kubeapi

import (
	"context"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func TestMain(m *testing.M) { Main(m, Options{}) }

func clientset(t *testing.T, srv *Server) *kubernetes.Clientset {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// eventually polls cond every 100 ms until it holds or the wait ends.
func eventually(t *testing.T, wait time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(wait)
	var lastErr error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last error: %v)", what, wait, lastErr)
}

// TestSharedServer: the admin credentials work from the rest.Config and
// from the kubeconfig file, and the apiserver runs with RBAC and the
// service-cluster-ip range asked for.
func TestSharedServer(t *testing.T) {
	srv := Shared(t)
	if again := Shared(t); again != srv {
		t.Fatal("Shared started a second server")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", srv.Kubeconfig())
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-works"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace through the kubeconfig: %v", err)
	}
	svc, err := cs.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ip-range"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ip := svc.Spec.ClusterIP; len(ip) < 6 || ip[:6] != "10.96." {
		t.Fatalf("ClusterIP %s is not in 10.96.0.0/16", ip)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != "v1.34.1" {
		t.Fatalf("server version %s, want the pinned v1.34.1", v.GitVersion)
	}
	// A user outside system:masters has no rights: RBAC is on.
	anon := srv.Config()
	anon.CertData, anon.KeyData = nil, nil
	if _, err := kubernetes.NewForConfigOrDie(anon).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("anonymous list of secrets: err = %v, want Forbidden", err)
	}
}

// TestControllerManager: with kube-controller-manager running, a Deployment
// gets its ReplicaSet and Pods (pods exist but never run: no kubelet), the
// garbage collector removes dependents, and a namespace deletion completes.
func TestControllerManager(t *testing.T) {
	srv := Shared(t)
	ctx := t.Context()
	if err := srv.StartControllerManager(ctx); err != nil {
		t.Fatal(err)
	}
	cs := clientset(t, srv)
	const ns = "kcm"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Pods are refused until the namespace's default ServiceAccount exists,
	// and the ReplicaSet controller backs off exponentially meanwhile.
	eventually(t, 2*time.Minute, "default ServiceAccount", func() (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	labels := map[string]string{"app": "echo"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "echo", Image: "echo"}}},
			},
		},
	}
	dep, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "two pods of the deployment", func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		return err == nil && len(pods.Items) == 2, err
	})
	// Garbage collection: deleting the Deployment in the background removes
	// its ReplicaSet and Pods.
	bg := metav1.DeletePropagationBackground
	if err := cs.AppsV1().Deployments(ns).Delete(ctx, dep.Name, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "pods garbage-collected", func() (bool, error) {
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0, err
	})
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "namespace deleted", func() (bool, error) {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// TestStopLeavesNothing: a private server's processes and folder are gone
// after Stop.
func TestStopLeavesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	srv, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	procs := []*process{srv.etcd, srv.apiserver}
	dir := srv.Dir()
	srv.Stop()
	srv.Stop() // idempotent
	for _, p := range procs {
		if !p.exited() {
			t.Errorf("%s still running after Stop", p.name)
		}
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s still exists after Stop", dir)
	}
}
