package nodesim

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

var everything = labels.Everything()

// sync brings one Pod (by key) to where a scheduler plus kubelet would
// take it: bound, running, ready, or stopped and gone.
func (s *Sim) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key we made; nothing to retry
	}
	pod, err := s.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// Deleted (perhaps forced) before we saw a deletionTimestamp.
		if b := s.backends[key]; b != nil && s.graceOver(key, b) {
			s.drop(key)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if b := s.backends[key]; b != nil && b.uid != pod.UID {
		s.drop(key) // a new Pod under an old name: the old one is gone
	}
	switch {
	case pod.Spec.NodeName == "":
		if pod.DeletionTimestamp != nil {
			return nil // the API server deletes unbound Pods at once
		}
		return s.bind(ctx, pod)
	case !s.ours(pod.Spec.NodeName):
		return nil
	case pod.DeletionTimestamp != nil:
		return s.terminate(ctx, key, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	}
	return s.run(ctx, key, pod)
}

func (s *Sim) bind(ctx context.Context, pod *corev1.Pod) error {
	node, ok := s.pickNode(pod)
	if !ok {
		s.log.Warn("nodesim: no node matches the pod's nodeSelector", "namespace", pod.Namespace, "pod", pod.Name)
		return nil
	}
	err := s.client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // bound by someone else, or gone: the informer will say
	}
	if err == nil {
		s.log.Debug("nodesim: bound", "namespace", pod.Namespace, "pod", pod.Name, "node", node)
	}
	return err
}

// pickNode goes round robin over the Nodes whose labels match the Pod's
// nodeSelector (the only placement rule honoured).
func (s *Sim) pickNode(pod *corev1.Pod) (string, bool) {
	for range s.nodes {
		n := s.nodes[s.nextNode%len(s.nodes)]
		s.nextNode++
		if labels.SelectorFromSet(pod.Spec.NodeSelector).Matches(labels.Set(nodeObject(n).Labels)) {
			return n.name, true
		}
	}
	return "", false
}

// run starts the Pod's backend if needed and reports it Running and Ready.
func (s *Sim) run(ctx context.Context, key string, pod *corev1.Pod) error {
	node, _ := s.node(pod.Spec.NodeName) // sync checked that it is ours
	b := s.backends[key]
	if b == nil {
		var err error
		b, err = s.startBackend(pod, node)
		if cfgErr := (configError{}); errors.As(err, &cfgErr) {
			s.log.Warn("nodesim: cannot start pod", "namespace", pod.Namespace, "pod", pod.Name, "err", err)
			return s.writeStatus(ctx, pod, failedStatus(pod, cfgErr))
		}
		if err != nil {
			return err
		}
		s.backends[key] = b
		s.log.Info("nodesim: pod running", "namespace", pod.Namespace, "pod", pod.Name,
			"node", node.name, "addr", b.ip.String(), "port", b.port)
	}
	return s.writeStatus(ctx, pod, runningStatus(pod, b, node.ip.String()))
}

// terminate plays the kubelet's part in a graceful deletion: stop the
// backend (after StopGrace), then remove the Pod object.
func (s *Sim) terminate(ctx context.Context, key string, pod *corev1.Pod) error {
	if b := s.backends[key]; b != nil {
		if !s.graceOver(key, b) {
			return nil
		}
		s.drop(key)
	}
	zero := int64(0)
	err := s.client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero,
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or the name is a new Pod's now
	}
	return err
}

// graceOver starts b's StopGrace on first call and reports whether it has
// passed; until then the key comes back when it will have.
func (s *Sim) graceOver(key string, b *backend) bool {
	if b.stopAt.IsZero() {
		b.stopAt = time.Now().Add(s.opts.StopGrace)
	}
	if wait := time.Until(b.stopAt); wait > 0 {
		s.queue.AddAfter(key, wait)
		return false
	}
	return true
}

func (s *Sim) drop(key string) {
	b := s.backends[key]
	s.stopBackend(b)
	delete(s.backends, key)
	s.log.Info("nodesim: backend stopped", "pod", key, "addr", b.ip.String())
}

// writeStatus skips no-op writes: every write is a watch event for the
// EndpointSlice controller and for us.
func (s *Sim) writeStatus(ctx context.Context, pod *corev1.Pod, status corev1.PodStatus) error {
	if equality.Semantic.DeepEqual(status, pod.Status) {
		return nil
	}
	pod = pod.DeepCopy() // never modify the informer's copy
	pod.Status = status
	_, err := s.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil // deleted meanwhile; its delete event follows
	}
	if err == nil {
		s.log.Debug("nodesim: status written", "namespace", pod.Namespace, "pod", pod.Name, "phase", status.Phase)
	}
	return err
}
