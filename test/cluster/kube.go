//go:build linux

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"pier.dev/pier/test/kubeapi"
)

// poll calls cond every 250 ms until it returns true or an error, or ctx
// ends; last says what was last seen, for the timeout's error.
func poll(ctx context.Context, what string, cond func() (bool, string, error)) error {
	var last string
	for {
		ok, seen, err := cond()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ok {
			return nil
		}
		last = seen
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (last: %s)", what, ctx.Err(), last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Namespace creates a namespace for one test, waits for its default
// ServiceAccount (pods are refused until the controller made it) and
// deletes it when the test ends.
func (c *Cluster) Namespace(t testing.TB, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Clientset.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		// Grace 0: the pods go with the namespace at once, not after
		// their 30 s grace period.
		zero := int64(0)
		_ = c.Clientset.CoreV1().Pods(name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		_ = c.Clientset.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	})
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := poll(wctx, "default ServiceAccount in "+name, func() (bool, string, error) {
		_, err := c.Clientset.CoreV1().ServiceAccounts(name).Get(wctx, "default", metav1.GetOptions{})
		return err == nil, fmt.Sprint(err), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// Apply server-side-applies objs as the admin (kubeapi.Apply: strict
// field validation, CRDs waited for).
func (c *Cluster) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	return kubeapi.Apply(ctx, c.Config(), false, objs...)
}

// ApplyFiles applies every manifest in the YAML files (helm template's
// output, deploy/).
func (c *Cluster) ApplyFiles(ctx context.Context, paths ...string) error {
	return kubeapi.ApplyFiles(ctx, c.Config(), paths...)
}

// ApplyManifest applies every document of a YAML (or JSON) stream, as
// kubectl apply -f - would.
func (c *Cluster) ApplyManifest(ctx context.Context, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("apply: decode: %w", err)
		}
		if obj != nil {
			objs = append(objs, &unstructured.Unstructured{Object: obj})
		}
	}
	return c.Apply(ctx, objs...)
}

// WaitPods waits until exactly n pods match selector in ns, each Running
// and Ready and none being deleted, and returns them sorted by name.
func (c *Cluster) WaitPods(ctx context.Context, ns, selector string, n int) ([]corev1.Pod, error) {
	var pods []corev1.Pod
	err := poll(ctx, fmt.Sprintf("%d Ready pods %q in %s", n, selector, ns), func() (bool, string, error) {
		list, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error(), nil
		}
		var states []string
		ready := 0
		for _, p := range list.Items {
			ok := p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && PodReady(&p)
			if ok {
				ready++
			}
			states = append(states, fmt.Sprintf("%s %s ready=%v node=%s %s", p.Name, p.Status.Phase, ok, p.Spec.NodeName, podWaiting(&p)))
		}
		pods = list.Items
		return ready == n && len(list.Items) == n, strings.Join(states, "; "), nil
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return pods, err
}

// podWaiting says why a pod's containers wait, if they do.
func podWaiting(p *corev1.Pod) string {
	var out []string
	for _, st := range p.Status.ContainerStatuses {
		if w := st.State.Waiting; w != nil {
			out = append(out, st.Name+": "+w.Reason+" "+w.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			out = append(out, string(c.Type)+": "+c.Message)
		}
	}
	return strings.Join(out, ", ")
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitDeployment waits until the Deployment's rollout is complete, as
// kubectl rollout status says it: the controller has seen the latest
// spec, every replica is updated, available, and no old one is left.
func (c *Cluster) WaitDeployment(ctx context.Context, ns, name string) error {
	return poll(ctx, "rollout of Deployment "+ns+"/"+name, func() (bool, string, error) {
		d, err := c.Clientset.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		seen := fmt.Sprintf("generation %d/%d, replicas %d updated %d available %d (want %d)",
			s.ObservedGeneration, d.Generation, s.Replicas, s.UpdatedReplicas, s.AvailableReplicas, want)
		for _, cond := range s.Conditions {
			if cond.Type == appsv1.DeploymentProgressing && cond.Reason == "ProgressDeadlineExceeded" {
				return false, seen, fmt.Errorf("progress deadline exceeded: %s", cond.Message)
			}
		}
		done := s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want &&
			s.Replicas == want && s.AvailableReplicas == want
		return done, seen, nil
	})
}

// WaitDaemonSet waits until the DaemonSet's rollout is complete: its
// latest spec is seen and runs, updated and available, on every node it
// should.
func (c *Cluster) WaitDaemonSet(ctx context.Context, ns, name string) error {
	return poll(ctx, "rollout of DaemonSet "+ns+"/"+name, func() (bool, string, error) {
		d, err := c.Clientset.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		s := d.Status
		seen := fmt.Sprintf("generation %d/%d, desired %d updated %d available %d ready %d",
			s.ObservedGeneration, d.Generation, s.DesiredNumberScheduled, s.UpdatedNumberScheduled, s.NumberAvailable, s.NumberReady)
		done := s.ObservedGeneration >= d.Generation && s.DesiredNumberScheduled > 0 &&
			s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled
		return done, seen, nil
	})
}

// Cordon marks the node unschedulable (or schedulable again with
// cordon false), as kubectl cordon and uncordon do.
func (c *Cluster) Cordon(ctx context.Context, node string, cordon bool) error {
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, cordon)
	_, err := c.Clientset.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// Evict asks the eviction API to evict the pod, retrying while a
// PodDisruptionBudget refuses (429) until ctx ends, as kubectl drain
// does.
func (c *Cluster) Evict(ctx context.Context, ns, pod string) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: ns}}
	return poll(ctx, "evict "+ns+"/"+pod, func() (bool, string, error) {
		err := c.Clientset.CoreV1().Pods(ns).EvictV1(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return true, "", nil
		case apierrors.IsTooManyRequests(err):
			return false, err.Error(), nil // a PDB says not now
		default:
			return false, "", err
		}
	})
}

// Drain cordons the node and evicts every pod on it that a DaemonSet does
// not own (kubectl drain --ignore-daemonsets), then waits until they are
// gone. Mirror pods and pods already terminating are skipped.
func (c *Cluster) Drain(ctx context.Context, node string) error {
	if err := c.Cordon(ctx, node, true); err != nil {
		return fmt.Errorf("drain %s: %w", node, err)
	}
	pods, err := c.Clientset.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return fmt.Errorf("drain %s: %w", node, err)
	}
	var evicted []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || ownedByDaemonSet(&p) {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if err := c.Evict(ctx, p.Namespace, p.Name); err != nil {
			return fmt.Errorf("drain %s: %w", node, err)
		}
		evicted = append(evicted, p)
	}
	for _, p := range evicted {
		err := poll(ctx, "pod "+p.Namespace+"/"+p.Name+" gone", func() (bool, string, error) {
			cur, err := c.Clientset.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && cur.UID != p.UID) {
				return true, "", nil
			}
			return false, fmt.Sprint(err), nil
		})
		if err != nil {
			return fmt.Errorf("drain %s: %w", node, err)
		}
	}
	return nil
}

func ownedByDaemonSet(p *corev1.Pod) bool {
	for _, o := range p.OwnerReferences {
		if o.Kind == "DaemonSet" && o.Controller != nil && *o.Controller {
			return true
		}
	}
	return false
}

// errNoPod is returned by PodOn when the node runs no matching pod.
var errNoPod = errors.New("no such pod")

// PodOn returns the running pod matching selector in ns on node.
func (c *Cluster) PodOn(ctx context.Context, ns, selector, node string) (*corev1.Pod, error) {
	list, err := c.Clientset.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if p := &list.Items[i]; p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%w: %q in %s on %s", errNoPod, selector, ns, node)
}
