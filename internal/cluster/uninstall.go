package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// podIdentity names the agent's own pod, from the environment the chart
// sets (the downward API); empty outside a pod.
type podIdentity struct{ namespace, name string }

func podFromEnv() podIdentity {
	return podIdentity{namespace: os.Getenv("POD_NAMESPACE"), name: os.Getenv("POD_NAME")}
}

// uninstalled reports whether the agent stops because pier is being
// removed from the cluster (helm uninstall, kubectl delete -k) rather than
// replaced (a rollout, a pod deletion, a drain): its pod's DaemonSet is
// gone or being deleted. Helm deletes the RBAC objects right after the
// DaemonSet, before the pods have ended, so an API server that no longer
// lets the agent read its own pod or DaemonSet says the same. Any other
// error says nothing, and nothing is removed.
func uninstalled(ctx context.Context, client kubernetes.Interface, pod podIdentity) (bool, string) {
	if pod.name == "" || pod.namespace == "" {
		return false, "not in a pod (no POD_NAME and POD_NAMESPACE)"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	p, err := client.CoreV1().Pods(pod.namespace).Get(ctx, pod.name, metav1.GetOptions{})
	if revoked(err) {
		return true, fmt.Sprintf("the agent may no longer read its pod: %v", err)
	}
	if err != nil {
		return false, fmt.Sprintf("read pod: %v", err)
	}
	for _, o := range p.OwnerReferences {
		if o.Kind != "DaemonSet" || o.Controller == nil || !*o.Controller {
			continue
		}
		ds, err := client.AppsV1().DaemonSets(pod.namespace).Get(ctx, o.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, "its DaemonSet " + o.Name + " is gone"
		case revoked(err):
			return true, fmt.Sprintf("the agent may no longer read its DaemonSet: %v", err)
		case err != nil:
			return false, fmt.Sprintf("read DaemonSet: %v", err)
		case ds.UID != o.UID:
			return true, "its DaemonSet " + o.Name + " was replaced"
		case ds.DeletionTimestamp != nil:
			return true, "its DaemonSet " + o.Name + " is being deleted"
		}
		return false, "its DaemonSet " + o.Name + " stays"
	}
	return false, "the pod has no DaemonSet"
}

func revoked(err error) bool { return apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) }

// removeState empties the agent's state folder once its data plane has
// stopped: the HAProxy folders, sockets and keepalived files of a node
// that pier leaves. The folder itself stays (it is the pod's mount).
func removeState(dir string, logger *slog.Logger) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		logger.Warn("uninstall: state folder not read", "dir", dir, "error", err)
		return
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			logger.Warn("uninstall: state not removed", "path", filepath.Join(dir, e.Name()), "error", err)
		}
	}
	logger.Info("uninstall: state folder emptied", "dir", dir, "entries", len(entries))
}
