package kubemode

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestOnlyChangesThatMatterRebuild: with the controller settled, a
// status-only Ingress update (someone clears it; pier repairs it with its
// own write), a Service no Ingress refers to (it shares the Ingress's
// name) and an agent report cause no rebuild, read from
// pier_rebuilds_total; each is seen (pier_snapshots_total,
// pier_status_passes_total). A new Ingress does rebuild, with reason
// "ingress".
func TestOnlyChangesThatMatterRebuild(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	e.create(e.ingress("web", "web.example", nil))
	ctl := e.startController("ctl-rebuild")
	addrs := e.waitPublished("web", time.Minute)
	base := settled(t, ctl)

	// Status only: cleared by someone else, repaired by a status pass;
	// pier's repair comes back through the informer too.
	statusSnaps := ctl.metric("pier_snapshots_total", `effect="status"`)
	e.clearStatus("web")
	e.waitStatus("web", addrs, 30*time.Second)
	eventually(t, 10*time.Second, "status-only snapshots seen", func() error {
		if got := ctl.metric("pier_snapshots_total", `effect="status"`); got < statusSnaps+1 {
			return fmt.Errorf("%v status snapshots, want more than %v", got, statusSnaps)
		}
		return nil
	})

	// A Service named like the Ingress, referred to by nothing: created,
	// then changed. The snapshots are taken and dropped. Quiet first, so
	// pier's repair does not share a snapshot with the Service.
	quiet(t, ctl)
	svcs := e.cs.CoreV1().Services(e.ns)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}
	ignoredBefore := ctl.metric("pier_snapshots_total", `effect="none"`)
	created, err := svcs.Create(t.Context(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitMetricAbove(t, ctl, "unreferenced Service created", ignoredBefore, "pier_snapshots_total", `effect="none"`)
	quiet(t, ctl)
	ignoredBefore = ctl.metric("pier_snapshots_total", `effect="none"`)
	created.Labels = map[string]string{"changed": "yes"}
	if _, err := svcs.Update(t.Context(), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitMetricAbove(t, ctl, "unreferenced Service changed", ignoredBefore, "pier_snapshots_total", `effect="none"`)

	// An agent report: the load balancer's status changes in the custom
	// resource; a status pass follows, no rebuild.
	passes := ctl.metric("pier_status_passes_total", `trigger="store"`)
	e.report("web", "report from the test")
	waitMetricAbove(t, ctl, "status pass after an agent report", passes, "pier_status_passes_total", `trigger="store"`)

	if got := ctl.metric("pier_rebuilds_total"); got != base {
		t.Errorf("rebuilds went from %v to %v on changes that do not matter", base, got)
	}
	if s := published(e.getIngress("web")); s != addrs {
		t.Errorf("Ingress web publishes %q, want %q", s, addrs)
	}

	// A change that matters does rebuild.
	ingresses := ctl.metric("pier_rebuilds_total", `reason="ingress"`)
	e.create(e.ingress("web2", "web2.example", nil))
	waitMetricAbove(t, ctl, "rebuild for a new Ingress", ingresses, "pier_rebuilds_total", `reason="ingress"`)
}

// settled waits until the controller's rebuild count stays put for 3 s
// and returns it.
func settled(t *testing.T, p *proc) float64 {
	t.Helper()
	last, since := p.metric("pier_rebuilds_total"), time.Now()
	deadline := time.Now().Add(time.Minute)
	for time.Since(since) < 3*time.Second {
		if time.Now().After(deadline) {
			t.Fatalf("rebuilds never settle: %v", last)
		}
		time.Sleep(200 * time.Millisecond)
		if n := p.metric("pier_rebuilds_total"); n != last {
			last, since = n, time.Now()
		}
	}
	if last == 0 {
		t.Fatal("no rebuild at all")
	}
	return last
}

// quiet waits until the controller has taken no snapshot for 1.5 s (the
// source debounces for 100 ms, at most 500 ms).
func quiet(t *testing.T, p *proc) {
	t.Helper()
	last, since := p.metric("pier_snapshots_total"), time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Since(since) < 1500*time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("snapshots never stop: %v", last)
		}
		time.Sleep(100 * time.Millisecond)
		if n := p.metric("pier_snapshots_total"); n != last {
			last, since = n, time.Now()
		}
	}
}

func waitMetricAbove(t *testing.T, p *proc, what string, than float64, name string, filters ...string) {
	t.Helper()
	eventually(t, 30*time.Second, what, func() error {
		if got := p.metric(name, filters...); got <= than {
			return fmt.Errorf("%s %v = %v", name, filters, got)
		}
		return nil
	})
}

// report changes the status message of Ingress name's LoadBalancer, as an
// agent's report would: in the active node's own entry, since readers
// recompute the summary from the per-node reports (a summary-only change
// is undone on read and is no report).
func (e *env) report(name, message string) {
	e.t.Helper()
	lb, ok := e.lbOf(name)
	if !ok {
		e.t.Fatalf("no load balancer for Ingress %s", name)
	}
	res := e.dyn.Resource(lbResource)
	u, err := res.Get(e.t.Context(), lb.Metadata.Name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	nodes, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
	for _, n := range nodes {
		if r, ok := n.(map[string]any); ok && r["node"] == activeNode {
			r["message"] = message
		}
	}
	if err := unstructured.SetNestedSlice(u.Object, nodes, "status", "nodes"); err != nil {
		e.t.Fatal(err)
	}
	if _, err := res.UpdateStatus(e.t.Context(), u, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}
