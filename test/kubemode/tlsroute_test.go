package kubemode

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	sourcekube "pier.dev/pier/internal/source/kube"
	"pier.dev/pier/test/kubeapi"
)

// TestTLSRouteV1alpha3: through a real API server serving the module's
// experimental TLSRoute CRD (v1alpha2 and v1alpha3), a TLSRoute created
// at v1alpha3 on a Gateway's TLS listener (tls.mode Passthrough) is
// watched through the dynamic client at that version, the newest
// served, and accepted in a status the leader writes at v1alpha3; the
// listener counts it and is Programmed once HAProxy serves it.
func TestTLSRouteV1alpha3(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installGatewayCRDs(t, e)
	installTLSRouteCRD(t, e)
	gw, err := gwclient.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	className := createGatewayClass(t, e, gw)
	passthrough := gwv1.TLSModePassthrough
	g := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: className,
			Listeners: []gwv1.Listener{{Name: "tls", Port: echoPort, Protocol: gwv1.TLSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{Mode: &passthrough}}}}}
	if _, err := gw.GatewayV1().Gateways(e.ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1alpha3", "kind": "TLSRoute",
		"metadata": map[string]any{"name": "echo", "namespace": e.ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "tls"}},
			"hostnames":  []any{"echo.example"},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": echoSvc, "port": int64(80)}}}},
		},
	}}
	routes := dyn.Resource(sourcekube.TLSRouteResource("v1alpha3")).Namespace(e.ns)
	if _, err := routes.Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	ctl := e.startController("ctl-tls")

	eventually(t, 2*time.Minute, "the v1alpha3 TLSRoute Accepted by pier", func() error {
		u, err := routes.Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := sourcekube.TLSRouteOf(u)
		if err != nil {
			return err
		}
		for _, p := range r.Status.Parents {
			if p.ControllerName == gatewayController {
				return onlyCondition(p.Conditions, "Accepted", metav1.ConditionTrue, r.Generation)
			}
		}
		return fmt.Errorf("parents %+v", r.Status.Parents)
	})
	eventually(t, time.Minute, "the TLS listener Programmed with the route", func() error {
		got, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Listeners) != 1 || got.Status.Listeners[0].AttachedRoutes != 1 ||
			len(got.Status.Listeners[0].SupportedKinds) != 1 || got.Status.Listeners[0].SupportedKinds[0].Kind != "TLSRoute" {
			return fmt.Errorf("listeners %+v", got.Status.Listeners)
		}
		return onlyCondition(got.Status.Listeners[0].Conditions, "Programmed", metav1.ConditionTrue, got.Generation)
	})
	if n := ctl.count("TLSRoutes are not served"); n != 0 {
		t.Errorf("the controller said %d times that TLSRoutes are not served", n)
	}
}

// installTLSRouteCRD installs the module's experimental TLSRoute CRD
// (v1alpha2 and v1alpha3).
func installTLSRouteCRD(t *testing.T, e *env) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental", "gateway.networking.k8s.io_tlsroutes.yaml")
	objs, err := kubeapi.ReadManifests(path)
	if err != nil || len(objs) != 1 {
		t.Fatalf("read %s: %d objects, %v", path, len(objs), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := kubeapi.Apply(ctx, e.srv.Config(), false, objs[0]); err != nil {
		t.Fatalf("install the TLSRoute CRD: %v", err)
	}
}
