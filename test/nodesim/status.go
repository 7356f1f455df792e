package nodesim

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerIDScheme marks container IDs as ours, as "containerd://" would.
const containerIDScheme = "nodesim://"

// runningStatus is the status a kubelet reports for a Pod whose containers
// all run and pass their readiness probes. Times are whole seconds, as the
// API stores them, so that an unchanged status compares equal to what the
// informer sends back and is not written again.
func runningStatus(pod *corev1.Pod, b *backend, hostIP string) corev1.PodStatus {
	started := metav1.NewTime(b.started.Truncate(time.Second))
	conds := make([]corev1.PodCondition, 0, 5)
	for _, t := range []corev1.PodConditionType{
		corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady,
		corev1.ContainersReady, corev1.PodScheduled,
	} {
		conds = append(conds, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: started})
	}
	st := corev1.PodStatus{
		Phase:      corev1.PodRunning,
		Conditions: mergeConditions(conds, pod.Status.Conditions),
		HostIP:     hostIP,
		HostIPs:    []corev1.HostIP{{IP: hostIP}},
		PodIP:      b.ip.String(),
		PodIPs:     []corev1.PodIP{{IP: b.ip.String()}},
		StartTime:  &started,
		QOSClass:   pod.Status.QOSClass, // immutable, set at creation
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name:        c.Name,
			Image:       c.Image,
			ImageID:     containerIDScheme + c.Image,
			ContainerID: containerIDScheme + string(pod.UID) + "/" + c.Name,
			Ready:       true,
			Started:     ptrTo(true),
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		})
	}
	return st
}

// failedStatus is the kubelet's report for a container it cannot create
// (CreateContainerConfigError): Pending, not ready, with the reason.
func failedStatus(pod *corev1.Pod, err error) corev1.PodStatus {
	st := *pod.Status.DeepCopy()
	st.Phase = corev1.PodPending
	notReady := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
			LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))}
	}
	st.Conditions = mergeConditions([]corev1.PodCondition{notReady(corev1.PodReady), notReady(corev1.ContainersReady)}, st.Conditions)
	st.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Started: ptrTo(false),
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
				Reason: "CreateContainerConfigError", Message: err.Error(),
			}},
		})
	}
	return st
}

// mergeConditions returns ours, keeping the transition time of a condition
// whose status did not change, followed by conditions others own (for
// example DisruptionTarget) unchanged.
func mergeConditions(ours, old []corev1.PodCondition) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(ours)+len(old))
	mine := map[corev1.PodConditionType]bool{}
	for _, c := range ours {
		mine[c.Type] = true
		for _, o := range old {
			if o.Type == c.Type && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		out = append(out, c)
	}
	for _, o := range old {
		if !mine[o.Type] {
			out = append(out, o)
		}
	}
	return out
}
