package kubemode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"pier.dev/pier/test/kubeapi"
)

// TestUDPRouteStatus: through a real API server, with the experimental
// channel's UDPRoute CRD and deploy/rbac.yaml's rules, the controller
// watches UDPRoutes and its leader writes their status: one on the UDP
// listener Accepted with its Service's UDP port resolved, one on the
// HTTP listener NotAllowedByListeners, and the listeners' supportedKinds
// and attachedRoutes. No agent runs: a UDP listener is programmed into
// the node's nftables, which a test must not touch outside a namespace
// of its own (test/e2e TestUDPRouteThroughPierRun serves one).
func TestUDPRouteStatus(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installGatewayCRDs(t, e)
	installUDPRouteCRD(t, e)
	gw, err := gwclient.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	className := gwv1.ObjectName(e.ns)
	class := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: string(className)},
		Spec: gwv1.GatewayClassSpec{ControllerName: gatewayController}}
	if _, err := gw.GatewayV1().GatewayClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = gw.GatewayV1().GatewayClasses().Delete(context.Background(), string(className), metav1.DeleteOptions{})
	})
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: className, Listeners: []gwv1.Listener{
			{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType},
			{Name: "dns", Port: 53, Protocol: gwv1.UDPProtocolType},
		}}}
	if _, err := gw.GatewayV1().Gateways(e.ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "coredns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	if _, err := e.cs.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	port := gwv1.PortNumber(53)
	for _, r := range []struct{ name, section string }{{"dns", "dns"}, {"on-http", "http"}} {
		route := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: r.name},
			Spec: gwv1alpha2.UDPRouteSpec{
				CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "gw", SectionName: ptrTo(gwv1.SectionName(r.section))}}},
				Rules: []gwv1alpha2.UDPRouteRule{{BackendRefs: []gwv1.BackendRef{{BackendObjectReference: gwv1.BackendObjectReference{
					Name: "coredns", Port: &port}}}}}}}
		if _, err := gw.GatewayV1alpha2().UDPRoutes(e.ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctl := e.startController("ctl-udp")
	for _, want := range []struct{ name, reason string }{{"dns", "Accepted"}, {"on-http", "NotAllowedByListeners"}} {
		eventually(t, 2*time.Minute, "UDPRoute "+want.name+" "+want.reason, func() error {
			r, err := gw.GatewayV1alpha2().UDPRoutes(e.ns).Get(ctx, want.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, p := range r.Status.Parents {
				if p.ControllerName != gatewayController {
					continue
				}
				for _, c := range p.Conditions {
					if c.Type == "Accepted" && c.Reason == want.reason && c.ObservedGeneration == r.Generation {
						return nil
					}
				}
				return fmt.Errorf("conditions %+v", p.Conditions)
			}
			return fmt.Errorf("parents %+v", r.Status.Parents)
		})
	}
	eventually(t, time.Minute, "the UDP listener's status", func() error {
		got, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, l := range got.Status.Listeners {
			if l.Name == "dns" {
				if l.AttachedRoutes != 1 || len(l.SupportedKinds) != 1 || l.SupportedKinds[0].Kind != "UDPRoute" {
					return fmt.Errorf("listener %+v", l)
				}
				return nil
			}
		}
		return fmt.Errorf("listeners %+v", got.Status.Listeners)
	})
	if n := ctl.count("UDPRoutes are not served"); n != 0 {
		t.Errorf("the controller said %d times that UDPRoutes are not served", n)
	}
}

// installUDPRouteCRD installs the module's experimental UDPRoute CRD
// (v1alpha2).
func installUDPRouteCRD(t *testing.T, e *env) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental", "gateway.networking.k8s.io_udproutes.yaml")
	objs, err := kubeapi.ReadManifests(path)
	if err != nil || len(objs) != 1 {
		t.Fatalf("read %s: %d objects, %v", path, len(objs), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := kubeapi.Apply(ctx, e.srv.Config(), false, objs[0]); err != nil {
		t.Fatalf("install the UDPRoute CRD: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }
