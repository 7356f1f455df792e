package kubemode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	sourcekube "pier.dev/pier/internal/source/kube"
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
	className := createGatewayClass(t, e, gw)
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

// TestUDPRouteV1: through a real API server with Gateway API v1.7's
// standard UDPRoute CRD (v1 served and stored, v1alpha2 not served), a
// UDPRoute created at v1 on a Gateway's UDP listener is watched through
// the dynamic client and accepted, with its Service's UDP port resolved,
// in a status the leader writes at v1. No agent runs, as in
// TestUDPRouteStatus.
func TestUDPRouteV1(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installGatewayCRDs(t, e)
	installStandardUDPRouteCRD(t, e)
	gw, err := gwclient.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	className := createGatewayClass(t, e, gw)
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: className,
			Listeners: []gwv1.Listener{{Name: "dns", Port: 53, Protocol: gwv1.UDPProtocolType}}}}
	if _, err := gw.GatewayV1().Gateways(e.ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "coredns"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}}}
	if _, err := e.cs.CoreV1().Services(e.ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "UDPRoute",
		"metadata": map[string]any{"name": "dns", "namespace": e.ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "dns"}},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": "coredns", "port": int64(53)}}}},
		},
	}}
	if _, err := dyn.Resource(sourcekube.UDPRouteV1).Namespace(e.ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ctl := e.startController("ctl-udp1")

	eventually(t, 2*time.Minute, "the v1 UDPRoute Accepted by pier", func() error {
		u, err := dyn.Resource(sourcekube.UDPRouteV1).Namespace(e.ns).Get(ctx, "dns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := sourcekube.UDPRouteOf(u)
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName != gatewayController {
				continue
			}
			if err := onlyCondition(p.Conditions, "Accepted", metav1.ConditionTrue, r.Generation); err != nil {
				return err
			}
			return onlyCondition(p.Conditions, "ResolvedRefs", metav1.ConditionTrue, r.Generation)
		}
		return fmt.Errorf("parents %+v", r.Status.Parents)
	})
	eventually(t, time.Minute, "the UDP listener's status", func() error {
		got, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Listeners) != 1 || got.Status.Listeners[0].AttachedRoutes != 1 ||
			len(got.Status.Listeners[0].SupportedKinds) != 1 || got.Status.Listeners[0].SupportedKinds[0].Kind != "UDPRoute" {
			return fmt.Errorf("listeners %+v", got.Status.Listeners)
		}
		return nil
	})
	if n := ctl.count("UDPRoutes are not served"); n != 0 {
		t.Errorf("the controller said %d times that UDPRoutes are not served", n)
	}
}

// installStandardUDPRouteCRD installs the standard channel's UDPRoute CRD
// of the Gateway API version the conformance suite requires
// (test/gatewayconformance/go.mod; v1.7.0 serves UDPRoute at v1 only),
// from the module cache: pier's own module (v1.4.1) has none.
func installStandardUDPRouteCRD(t *testing.T, e *env) {
	t.Helper()
	gomod, err := kubeapi.RepoPath("test", "gatewayconformance", "go.mod")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	version := ""
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "sigs.k8s.io/gateway-api" {
			version = f[1]
		}
	}
	if version == "" {
		t.Fatalf("%s requires no sigs.k8s.io/gateway-api", gomod)
	}
	// Read from the module cache, where test/gatewayconformance's
	// module put it (go mod download refuses it: v1.7.0 requires a newer
	// go than pier's toolchain).
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(cache)), "sigs.k8s.io", "gateway-api@"+version)
	if _, err := os.Stat(dir); err != nil {
		msg := fmt.Sprintf("sigs.k8s.io/gateway-api %s is not in the module cache (hack/test.sh downloads it: cd test/gatewayconformance && GOTOOLCHAIN=go1.27.3 go mod download sigs.k8s.io/gateway-api): %v", version, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	path := filepath.Join(dir, "config", "crd", "standard", "gateway.networking.k8s.io_udproutes.yaml")
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
