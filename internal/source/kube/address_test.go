package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func nodeWith(annotation string, addrs ...corev1.NodeAddress) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1"}}
	if annotation != "" {
		n.Annotations = map[string]string{AnnotationVRRPAddress: annotation}
	}
	n.Status.Addresses = addrs
	return n
}

func internalIP(a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a}
}

func TestNodeAddress(t *testing.T) {
	external := corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.9"}
	tests := []struct {
		name string
		node *corev1.Node
		want string // "" for none
		ok   bool
	}{
		{"first IPv4 InternalIP", nodeWith("", external, internalIP("2001:db8::1"), internalIP("10.0.0.1"), internalIP("10.0.0.2")), "10.0.0.1", true},
		{"IPv6 only", nodeWith("", internalIP("2001:db8::1"), internalIP("2001:db8::2")), "2001:db8::1", true},
		{"no InternalIP", nodeWith("", external), "", true},
		{"annotation wins", nodeWith("192.0.2.7", internalIP("10.0.0.1")), "192.0.2.7", true},
		{"bad annotation: no guess", nodeWith("10.0.0.1; rm -rf", internalIP("10.0.0.1")), "", false},
		{"unspecified annotation", nodeWith("0.0.0.0", internalIP("10.0.0.1")), "", false},
		{"zone refused", nodeWith("fe80::1%eth0", internalIP("10.0.0.1")), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := nodeAddress(tt.node)
			s := ""
			if got.IsValid() {
				s = got.String()
			}
			if s != tt.want || ok != tt.ok {
				t.Fatalf("nodeAddress = %q, %v; want %q, %v", s, ok, tt.want, tt.ok)
			}
		})
	}
}

// An address change is not a heartbeat: it must bring a new snapshot.
func TestNodeAddressChangeNotifies(t *testing.T) {
	old := nodeWith("", internalIP("10.0.0.1"))
	cur := old.DeepCopy()
	cur.ResourceVersion = "2"
	ch := make(chan struct{}, 1)
	notifyIfChanged(ch, old, cur)
	if len(ch) != 0 {
		t.Fatal("a heartbeat notified")
	}
	cur.Annotations = map[string]string{AnnotationVRRPAddress: "192.0.2.7"}
	notifyIfChanged(ch, old, cur)
	if len(ch) != 1 {
		t.Fatal("an address change did not notify")
	}
}
