package nodesim

import (
	"context"
	"fmt"
	"runtime"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaseNamespace holds the kubelets' heartbeat Leases.
const leaseNamespace = "kube-node-lease"

// kubeletVersion marks the Nodes as simulated for anyone reading them.
const kubeletVersion = "v0.0.0-nodesim"

// registerNodes creates the Nodes, or takes over existing ones (a Sim
// restarted with the same names), and publishes a Ready status.
func (s *Sim) registerNodes(ctx context.Context) error {
	for _, n := range s.nodes {
		node := nodeObject(n)
		_, err := s.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("nodesim: register node %s: %w", n.name, err)
		}
		// Status is ignored on create; it goes through the subresource.
		if err := s.renewNode(ctx, n); err != nil {
			return fmt.Errorf("nodesim: node %s: %w", n.name, err)
		}
	}
	return nil
}

// heartbeat keeps the Nodes' Ready condition and Leases fresh, so a node
// lifecycle controller, if a test runs one, does not evict our Pods.
func (s *Sim) heartbeat() {
	tick := time.NewTicker(s.opts.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		}
		for _, n := range s.nodes {
			if err := s.renewNode(s.ctx, n); err != nil && s.ctx.Err() == nil {
				s.log.Warn("nodesim: node heartbeat failed", "node", n.name, "err", err)
			}
		}
	}
}

func (s *Sim) renewNode(ctx context.Context, n simNode) error {
	nodes := s.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	status := nodeStatus(n, time.Now())
	keepTransitionTimes(status.Conditions, node.Status.Conditions)
	node.Status = status
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return s.renewLease(ctx, node)
}

func (s *Sim) renewLease(ctx context.Context, node *corev1.Node) error {
	leases := s.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, node.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: node.Name,
				// As the kubelet does: the Lease goes with its Node.
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
				}},
			},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity:       ptrTo(node.Name),
				LeaseDurationSeconds: ptrTo(int32(40)),
				RenewTime:            &now,
			},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease.Spec.RenewTime = &now
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}

func nodeObject(n simNode) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.name,
			Labels: map[string]string{
				corev1.LabelHostname:   n.name,
				corev1.LabelOSStable:   runtime.GOOS,
				corev1.LabelArchStable: runtime.GOARCH,
				"pier.dev/nodesim":     "true",
			},
		},
	}
}

func nodeStatus(n simNode, now time.Time) corev1.NodeStatus {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("8Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	cond := func(t corev1.NodeConditionType, st corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{
			Type: t, Status: st, Reason: reason,
			LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now),
		}
	}
	return corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity,
		Phase:       corev1.NodeRunning,
		Conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
			cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
			cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
			cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
		},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: n.ip.String()},
			{Type: corev1.NodeHostName, Address: n.name},
		},
		NodeInfo: corev1.NodeSystemInfo{
			KubeletVersion:  kubeletVersion,
			OperatingSystem: runtime.GOOS,
			Architecture:    runtime.GOARCH,
		},
	}
}

// keepTransitionTimes carries over when a condition last changed: a
// heartbeat renews LastHeartbeatTime only.
func keepTransitionTimes(conds, old []corev1.NodeCondition) {
	for i := range conds {
		for _, o := range old {
			if o.Type == conds[i].Type && o.Status == conds[i].Status {
				conds[i].LastTransitionTime = o.LastTransitionTime
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
