package pipeline

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestChangedNamedBetweenSharedEnds: comparing only what lies between
// the ends both lists share finds what a comparison of the whole lists
// finds: an object of the set added, removed, edited or moved; nothing
// when the set's objects are the same, whatever else came or went.
func TestChangedNamedBetweenSharedEnds(t *testing.T) {
	svc := func(name, rv string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
	}
	a, b, c, d := svc("a", "1"), svc("b", "1"), svc("c", "1"), svc("d", "1")
	bEdited := svc("b", "2")
	bEdited.Labels = map[string]string{"x": "y"}
	set := nameSet{"ns/b": true, "ns/c": true}
	for _, tc := range []struct {
		name       string
		prev, next []*corev1.Service
		want       bool
	}{
		{"same lists", []*corev1.Service{a, b, c}, []*corev1.Service{a, b, c}, false},
		{"another object added last", []*corev1.Service{a, b, c}, []*corev1.Service{a, b, c, d}, false},
		{"another object added first", []*corev1.Service{b, c}, []*corev1.Service{d, b, c}, false},
		{"another object removed", []*corev1.Service{a, b, c}, []*corev1.Service{b, c}, false},
		{"an object of the set edited", []*corev1.Service{a, b, c}, []*corev1.Service{a, bEdited, c}, true},
		{"an object of the set removed", []*corev1.Service{a, b, c}, []*corev1.Service{a, c}, true},
		{"an object of the set removed last", []*corev1.Service{a, b, c}, []*corev1.Service{a, b}, true},
		{"the set's objects reordered", []*corev1.Service{a, b, c}, []*corev1.Service{a, c, b}, false},
		{"an object of the set edited in place, the others shared", []*corev1.Service{a, b, c, d}, []*corev1.Service{a, bEdited, c, d}, true},
		{"an object of the set edited first", []*corev1.Service{b, c, d}, []*corev1.Service{bEdited, c, d}, true},
		{"another object edited in place", []*corev1.Service{a, b, c}, []*corev1.Service{svc("a", "2"), b, c}, false},
	} {
		whole := changed(filterNamed(set, tc.prev), filterNamed(set, tc.next), sameService)
		if got := changedNamed(set, tc.prev, tc.next, sameService); got != tc.want || whole != tc.want {
			t.Errorf("%s: changedNamed %v, whole lists %v, want %v", tc.name, got, whole, tc.want)
		}
	}
}
