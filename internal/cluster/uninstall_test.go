package cluster

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestUninstalled: the agent empties its node only when its DaemonSet is
// gone, replaced or being deleted, or the API server no longer lets it
// read its pod; a rollout (the DaemonSet stays) or an API error keeps
// everything.
func TestUninstalled(t *testing.T) {
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pier-agent-x", Namespace: "pier-system",
		OwnerReferences: []metav1.OwnerReference{{Kind: "DaemonSet", Name: "pier-agent", UID: "u1", Controller: &yes}}}}
	ds := func(uid types.UID, deleting bool) *appsv1.DaemonSet {
		d := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "pier-agent", Namespace: "pier-system", UID: uid}}
		if deleting {
			now := metav1.Now()
			d.DeletionTimestamp = &now
			d.Finalizers = []string{"orphan"}
		}
		return d
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "pier-agent-x", errors.New("no"))
	cases := []struct {
		name    string
		objects []runtime.Object
		podErr  error
		env     podIdentity
		want    bool
	}{
		{"rollout: the DaemonSet stays", []runtime.Object{pod, ds("u1", false)}, nil, podIdentity{"pier-system", "pier-agent-x"}, false},
		{"DaemonSet gone", []runtime.Object{pod}, nil, podIdentity{"pier-system", "pier-agent-x"}, true},
		{"DaemonSet being deleted", []runtime.Object{pod, ds("u1", true)}, nil, podIdentity{"pier-system", "pier-agent-x"}, true},
		{"DaemonSet replaced", []runtime.Object{pod, ds("u2", false)}, nil, podIdentity{"pier-system", "pier-agent-x"}, true},
		{"RBAC gone", []runtime.Object{pod}, forbidden, podIdentity{"pier-system", "pier-agent-x"}, true},
		{"API error", []runtime.Object{pod}, apierrors.NewServiceUnavailable("down"), podIdentity{"pier-system", "pier-agent-x"}, false},
		{"not in a pod", []runtime.Object{pod}, nil, podIdentity{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(tc.objects...)
			if tc.podErr != nil {
				client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.podErr
				})
			}
			got, why := uninstalled(context.Background(), client, tc.env)
			if got != tc.want {
				t.Errorf("uninstalled = %v (%s), want %v", got, why, tc.want)
			}
		})
	}
}
