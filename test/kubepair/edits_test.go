//go:build linux

package kubepair

import (
	"context"
	"net/netip"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"pier.dev/pier/test/harness"
)

// editPause spaces the edits: past the controller's debounce, so each is
// its own change on both nodes.
const editPause = 150 * time.Millisecond

// edits makes 100 endpoint changes (a second backend comes and goes in
// EndpointSlice echo-2) and 20 Ingress edits (a rule for another host
// comes and goes, which reloads HAProxy on both nodes) through the API
// server under load: no request may fail, and the addresses stay put.
func edits(t *testing.T, w *world, vip netip.Addr, holder string) {
	ctx := t.Context()
	echo2 := w.lab.Pods.Command(context.WithoutCancel(ctx), w.bin, "echo",
		"--listen", netip.AddrPortFrom(w.lab.Pods.Addr, echoPort+1).String(),
		"--namespace", appNS, "--service", "echo", "--pod", "echo-2", "--log-level", "warn")
	if err := echo2.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = echo2.Process.Kill(); _ = echo2.Wait() }()
	slice, err := w.createSlice(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reloads := w.reloadCounts(t)
	p := w.probe(vip, failureTimeout)
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	ready, addr := true, w.lab.Pods.Addr.String()
	for i := range 100 {
		slice.Endpoints = nil
		if i%2 == 0 {
			slice.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}}
		}
		if slice, err = w.cs.DiscoveryV1().EndpointSlices(appNS).Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
			p.Stop()
			t.Fatalf("endpoint change %d: %v", i, err)
		}
		if i%5 == 0 {
			if err := w.editIngress(ctx, i/5%2 == 0); err != nil {
				p.Stop()
				t.Fatalf("Ingress edit %d: %v", i/5, err)
			}
		}
		time.Sleep(editPause)
	}
	took := time.Since(start)
	time.Sleep(time.Second)
	samples := p.Stop()
	now := w.reloadCounts(t)
	t.Logf("edits: 100 endpoint changes and 20 Ingress edits in %s; reloads n0 +%v, n1 +%v; %s",
		took.Round(time.Millisecond), now["n0"]-reloads["n0"], now["n1"]-reloads["n1"], harness.Summary(samples))
	if failed := harness.Failed(samples, time.Time{}, time.Now()); len(failed) > 0 {
		t.Errorf("%d requests failed during the edits, first %+v", len(failed), failed[0])
	}
	if !w.holds(holder, vip) {
		t.Errorf("VIP holders after the edits: %v, want [%s]", w.lab.Holders(vip), holder)
	}
	// The edits reached both nodes: each reloaded for the Ingress edits.
	for _, n := range []string{"n0", "n1"} {
		if now[n] == reloads[n] {
			t.Errorf("the agent on %s did not reload for the Ingress edits", n)
		}
	}
}

// createSlice adds EndpointSlice echo-2 of Service echo, port 9002, with
// no endpoint yet.
func (w *world) createSlice(ctx context.Context) (*discoveryv1.EndpointSlice, error) {
	port, portName := int32(echoPort+1), "http"
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "echo-2", Labels: map[string]string{discoveryv1.LabelServiceName: "echo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port}},
	}
	return w.cs.DiscoveryV1().EndpointSlices(appNS).Create(ctx, slice, metav1.CreateOptions{})
}

// editIngress adds (extra) or removes the rule for extra.example; the
// controller writes the status meanwhile, hence the retry on conflict.
func (w *world) editIngress(ctx context.Context, extra bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ing, err := w.cs.NetworkingV1().Ingresses(appNS).Get(ctx, ingName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		rules := ing.Spec.Rules[len(ing.Spec.Rules)-1:]
		if extra {
			// An Exact path: the first of its host class adds a lookup to
			// the frontend, a reload (a Prefix route to the same Service
			// would only add a map entry through the runtime API).
			r := *rules[0].DeepCopy()
			r.Host = "extra.example"
			exact := networkingv1.PathTypeExact
			r.HTTP.Paths = r.HTTP.Paths[:1]
			r.HTTP.Paths[0].Path, r.HTTP.Paths[0].PathType = "/extra", &exact
			rules = append([]networkingv1.IngressRule{r}, rules...)
		}
		ing.Spec.Rules = rules
		_, err = w.cs.NetworkingV1().Ingresses(appNS).Update(ctx, ing, metav1.UpdateOptions{})
		return err
	})
}
