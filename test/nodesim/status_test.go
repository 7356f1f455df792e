package nodesim

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRunningStatus(t *testing.T) {
	pod := testPod()
	bound := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	pod.Status = corev1.PodStatus{
		Phase:    corev1.PodPending,
		QOSClass: corev1.PodQOSBestEffort,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: bound},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "Test"},
		},
	}
	b := &backend{uid: pod.UID, ip: netip.MustParseAddr("10.244.0.9"), started: time.Date(2026, 1, 2, 3, 4, 9, 999, time.UTC)}
	st := runningStatus(pod, b, "10.244.0.3")

	if st.Phase != corev1.PodRunning || st.PodIP != "10.244.0.9" || len(st.PodIPs) != 1 || st.PodIPs[0].IP != st.PodIP ||
		st.HostIP != "10.244.0.3" || st.QOSClass != corev1.PodQOSBestEffort {
		t.Fatalf("status %+v", st)
	}
	if ns := st.StartTime.Nanosecond(); ns != 0 {
		t.Errorf("start time has %d ns; the API keeps seconds, so it would never compare equal", ns)
	}
	got := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range st.Conditions {
		got[c.Type] = c
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized, corev1.PodScheduled} {
		if got[typ].Status != corev1.ConditionTrue {
			t.Errorf("condition %s = %q, want True", typ, got[typ].Status)
		}
	}
	if !got[corev1.PodScheduled].LastTransitionTime.Time.Equal(bound.Time) {
		t.Errorf("PodScheduled transition time %v, want the binding's %v", got[corev1.PodScheduled].LastTransitionTime, bound)
	}
	if got[corev1.DisruptionTarget].Reason != "Test" {
		t.Error("a condition owned by someone else was dropped")
	}
	if len(st.ContainerStatuses) != 1 || !st.ContainerStatuses[0].Ready || st.ContainerStatuses[0].State.Running == nil {
		t.Errorf("container statuses %+v", st.ContainerStatuses)
	}
}

func TestContainerPort(t *testing.T) {
	pod := testPod()
	if got := containerPort(pod); got != DefaultPort {
		t.Errorf("no ports: %d, want %d", got, DefaultPort)
	}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{
		{ContainerPort: 53, Protocol: corev1.ProtocolUDP},
		{Name: "http", ContainerPort: 8080},
	}
	if got := containerPort(pod); got != 8080 {
		t.Errorf("ports %v: %d, want the first TCP one, 8080", pod.Spec.Containers[0].Ports, got)
	}
}
