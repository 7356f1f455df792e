package kubemode

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestStatusWriter: --status-address publishes the static list in every
// Ingress of our class and never touches one of another class; a
// controller restarted with --status-service publishes that Service's
// addresses and follows their changes with one write per Ingress; a quiet
// controller writes nothing (resourceVersions stay put for 10 s); SIGTERM
// leaves every status as it was.
func TestStatusWriter(t *testing.T) {
	e := newEnv(t)
	foreign := e.foreignIngress()
	writes := e.recordWrites()
	e.startAgent()
	e.create(e.ingress("ours", "ours.example", nil))
	e.create(e.ingress("ours2", "ours2.example", nil))

	ctl := e.startController("ctl-static", "--status-address", "198.51.100.7", "--status-address", "lb.example.com")
	for _, name := range []string{"ours", "ours2"} {
		e.waitStatus(name, "198.51.100.7,lb.example.com", time.Minute)
	}
	if err := ctl.stop(15 * time.Second); err != nil {
		t.Errorf("controller exit after SIGTERM: %v\n%s", err, ctl.tail(10))
	}

	svc := e.statusService("203.0.113.5")
	e.startController("ctl-service", "--status-service", e.ns+"/"+svc)
	for _, name := range []string{"ours", "ours2"} {
		e.waitStatus(name, "203.0.113.5", time.Minute)
		// The recorder watches: its event for that write can come after
		// the read above, and would then count as a second update.
		writes.waitSeen(t, name, "203.0.113.5", 10*time.Second)
	}
	before := map[string]int{"ours": len(writes.of("ours")), "ours2": len(writes.of("ours2"))}
	e.setServiceStatus(svc, "203.0.113.6", "lb2.example")
	for _, name := range []string{"ours", "ours2"} {
		e.waitStatus(name, "203.0.113.6,lb2.example", 30*time.Second)
		writes.waitSeen(t, name, "203.0.113.6,lb2.example", 10*time.Second)
		if n := len(writes.of(name)) - before[name]; n != 1 {
			t.Errorf("Ingress %s: %d updates for one Service address change, want 1", name, n)
		}
	}

	// Someone else clears a status: the next pass (any change; here a new
	// Ingress) restores it, though pier wrote that value before.
	e.clearStatus("ours2")
	e.create(e.ingress("ours3", "ours3.example", nil))
	for _, name := range []string{"ours2", "ours3"} {
		e.waitStatus(name, "203.0.113.6,lb2.example", 30*time.Second)
	}

	e.checkQuiet(writes, 10*time.Second, "ours", "ours2", "ours3", "foreign")
	for _, p := range e.procs {
		if p.role == "controller" {
			if err := p.stop(15 * time.Second); err != nil {
				t.Errorf("%s exit after SIGTERM: %v", p.name, err)
			}
		}
	}
	time.Sleep(time.Second)
	for _, name := range []string{"ours", "ours2", "ours3"} {
		if s := published(e.getIngress(name)); s != "203.0.113.6,lb2.example" {
			t.Errorf("after SIGTERM Ingress %s publishes %q, want it kept", name, s)
		}
	}
	if got := e.getIngress("foreign"); got.ResourceVersion != foreign.ResourceVersion || published(got) != "192.0.2.99" {
		t.Errorf("Ingress of another class: resourceVersion %s → %s, status %q: pier touched it",
			foreign.ResourceVersion, got.ResourceVersion, published(got))
	}
}

// checkQuiet: over d with nothing changing, no Ingress is updated and
// every resourceVersion stays put (no-op writes are skipped).
func (e *env) checkQuiet(writes *writeLog, d time.Duration, names ...string) {
	e.t.Helper()
	from := writes.total()
	rvs := e.resourceVersions(names...)
	time.Sleep(d)
	if n := writes.total() - from; n > 0 {
		e.t.Errorf("%d Ingress updates over a quiet %s (no-op writes)", n, d)
	}
	if now := e.resourceVersions(names...); now != rvs {
		e.t.Errorf("resourceVersions over a quiet %s: %s → %s", d, rvs, now)
	}
	e.t.Logf("quiet %s: resourceVersions %s unchanged", d, rvs)
}

// foreignIngress creates an Ingress of class "other" (another controller)
// with a status of its own.
func (e *env) foreignIngress() *networkingv1.Ingress {
	e.t.Helper()
	ctx := e.t.Context()
	class := &networkingv1.IngressClass{
		ObjectMeta: metav1.ObjectMeta{Name: "other"},
		Spec:       networkingv1.IngressClassSpec{Controller: "example.com/other"},
	}
	if _, err := e.cs.NetworkingV1().IngressClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatal(err)
	}
	ing := e.ingress("foreign", "foreign.example", nil)
	other := "other"
	ing.Spec.IngressClassName = &other
	ing = e.create(ing)
	ing.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "192.0.2.99"}}
	ing, err := e.cs.NetworkingV1().Ingresses(e.ns).UpdateStatus(ctx, ing, metav1.UpdateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ing
}

// statusService creates a Service of type LoadBalancer whose status holds
// addrs (as a cloud's controller would write it).
func (e *env) statusService(addrs ...string) string {
	e.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "pier-lb"},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: map[string]string{"app": "pier"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(80)}},
		},
	}
	if _, err := e.cs.CoreV1().Services(e.ns).Create(e.t.Context(), svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.setServiceStatus(svc.Name, addrs...)
	return svc.Name
}

func (e *env) setServiceStatus(name string, addrs ...string) {
	e.t.Helper()
	svcs := e.cs.CoreV1().Services(e.ns)
	svc, err := svcs.Get(e.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = nil
	for _, a := range addrs {
		in := corev1.LoadBalancerIngress{Hostname: a}
		if a[0] >= '0' && a[0] <= '9' {
			in = corev1.LoadBalancerIngress{IP: a}
		}
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, in)
	}
	if _, err := svcs.UpdateStatus(e.t.Context(), svc, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) resourceVersions(names ...string) string {
	out := ""
	for _, n := range names {
		out += n + "@" + e.getIngress(n).ResourceVersion + " "
	}
	return out
}

// clearStatus empties an Ingress's status as another writer would.
func (e *env) clearStatus(name string) {
	e.t.Helper()
	ing := e.getIngress(name)
	ing.Status.LoadBalancer.Ingress = nil
	if _, err := e.cs.NetworkingV1().Ingresses(e.ns).UpdateStatus(e.t.Context(), ing, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
