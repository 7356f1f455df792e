package cluster

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// checkLeaseNamespace fails at start when the namespace of pier's Leases
// does not exist. Without it, leader election and heartbeats retry their
// Lease writes every few seconds forever, each failure a log line that
// never says which flag fixes it (pier controller run from a laptop
// against a cluster pier is not installed in). RBAC that does not allow
// reading namespaces skips the check (the shipped one allows it since
// the Gateway API reads Namespace labels): inside a cluster pier's own
// namespace exists.
func checkLeaseNamespace(ctx context.Context, client kubernetes.Interface, namespace string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("namespace %q (--lease-namespace, where pier keeps its Leases) does not exist: "+
			"create it (kubectl create namespace %s, or apply deploy/) or name another with --lease-namespace", namespace, namespace)
	}
	return nil
}
