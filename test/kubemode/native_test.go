package kubemode

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNativeServiceStatus through the real API server: a
// Service of type LoadBalancer of class pier.dev/native gets a native
// load balancer and its VIP and floating IP in status.loadBalancer, from
// the leader; one the native provider cannot serve as asked gets a
// Warning Event with the reason and no address; a Service of another
// class is left alone.
func TestNativeServiceStatus(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	e.startController("ctl-native")
	class, other := "pier.dev/native", "example.com/other-lb"
	e.createService(e.lbService("native", &class, nil))
	local := e.lbService("local", &class, nil)
	local.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	e.createService(local)
	e.createService(e.lbService("foreign", &other, nil))

	var lb lbObject
	eventually(t, time.Minute, "a LoadBalancer object for the native Service", func() error {
		var ok bool
		if lb, ok = e.serviceLB("native"); !ok || lb.Spec.VIP == "" {
			return fmt.Errorf("none with addresses yet")
		}
		return nil
	})
	if lb.Spec.Provider != "native" {
		t.Errorf("LoadBalancer %s has provider %q, want native", lb.Metadata.Name, lb.Spec.Provider)
	}
	want := lb.Spec.VIP
	if lb.Spec.FIP != "" {
		want += "," + lb.Spec.FIP
	}
	eventually(t, time.Minute, "the native Service's status", func() error {
		if got := servicePublished(e.getService("native")); got != want {
			return fmt.Errorf("status %q, want %q", got, want)
		}
		return nil
	})
	t.Logf("native Service: load balancer %s, status %s", lb.Metadata.Name, want)

	ev := e.waitServiceEvent("local", "UnsupportedTrafficPolicy", 30*time.Second)
	t.Logf("Event on the refused Service: %s %s: %s", ev.Type, ev.Reason, ev.Message)
	time.Sleep(2 * time.Second) // time for a wrong write to show
	for _, name := range []string{"local", "foreign"} {
		if s := servicePublished(e.getService(name)); s != "" {
			t.Errorf("Service %s publishes %q, want nothing", name, s)
		}
	}
	if evs := e.serviceEvents("foreign"); len(evs) > 0 {
		t.Errorf("a Service of another class got Events from pier: %+v", evs[0])
	}
}

// serviceLB is the LoadBalancer object serving Service name.
func (e *env) serviceLB(name string) (lbObject, bool) {
	for _, lb := range e.loadBalancers() {
		for _, s := range lb.Spec.Sources {
			if s.Kind == "Service" && s.Namespace == e.ns && s.Name == name {
				return lb, true
			}
		}
	}
	return lbObject{}, false
}

// lbService is a Service of type LoadBalancer with one TCP port and no
// selector (nothing runs the endpoint controller here).
func (e *env) lbService(name string, class *string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class,
			Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
}

func (e *env) createService(svc *corev1.Service) {
	e.t.Helper()
	if _, err := e.cs.CoreV1().Services(e.ns).Create(e.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatalf("create Service %s: %v", svc.Name, err)
	}
}

func (e *env) getService(name string) *corev1.Service {
	e.t.Helper()
	svc, err := e.cs.CoreV1().Services(e.ns).Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatalf("get Service %s: %v", name, err)
	}
	return svc
}

// servicePublished is a Service's status.loadBalancer.ingress as "a,b".
func servicePublished(svc *corev1.Service) string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP+in.Hostname)
	}
	return strings.Join(out, ",")
}

func (e *env) serviceEvents(name string) []corev1.Event {
	e.t.Helper()
	list, err := e.cs.CoreV1().Events(e.ns).List(e.t.Context(), metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Service,involvedObject.name=" + name,
	})
	if err != nil {
		e.t.Fatalf("list events: %v", err)
	}
	return list.Items
}

func (e *env) waitServiceEvent(name, reason string, d time.Duration) corev1.Event {
	e.t.Helper()
	var ev corev1.Event
	eventually(e.t, d, "Event "+reason+" on Service "+name, func() error {
		evs := slices.DeleteFunc(e.serviceEvents(name), func(ev corev1.Event) bool { return ev.Reason != reason })
		if len(evs) == 0 {
			return fmt.Errorf("none")
		}
		ev = evs[0]
		return nil
	})
	if ev.Type != corev1.EventTypeWarning {
		e.t.Errorf("Event %s on Service %s has type %s, want Warning", reason, name, ev.Type)
	}
	return ev
}
