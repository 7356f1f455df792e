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

// TestTCPRouteV1: through a real API server, a TCPRoute created at v1
// (the standard channel since Gateway API v1.6, the version the
// conformance suite v1.7.0 creates) on a Gateway's TCP listener is
// watched through the dynamic client, accepted in a status the leader
// writes at v1, and its connections reach both echo pods through HAProxy
// mode tcp on the VIP and the FIP.
func TestTCPRouteV1(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	installGatewayCRDs(t, e)
	installTCPRouteV1CRD(t, e)
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
			Listeners: []gwv1.Listener{{Name: "tcp", Port: echoPort, Protocol: gwv1.TCPProtocolType}}}}
	if _, err := gw.GatewayV1().Gateways(e.ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	route := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1", "kind": "TCPRoute",
		"metadata": map[string]any{"name": "echo", "namespace": e.ns},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "gw", "sectionName": "tcp"}},
			"rules":      []any{map[string]any{"backendRefs": []any{map[string]any{"name": echoSvc, "port": int64(80)}}}},
		},
	}}
	if _, err := dyn.Resource(sourcekube.TCPRouteV1).Namespace(e.ns).Create(ctx, route, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	ctl := e.startController("ctl-tcp")

	eventually(t, 2*time.Minute, "the v1 TCPRoute Accepted by pier", func() error {
		u, err := dyn.Resource(sourcekube.TCPRouteV1).Namespace(e.ns).Get(ctx, "echo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := sourcekube.TCPRouteOf(u)
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
	var vip, fip string
	eventually(t, time.Minute, "Gateway Programmed with its addresses", func() error {
		got, err := gw.GatewayV1().Gateways(e.ns).Get(ctx, "gw", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(got.Status.Addresses) != 2 || len(got.Status.Listeners) != 1 || got.Status.Listeners[0].AttachedRoutes != 1 {
			return fmt.Errorf("addresses %+v listeners %+v", got.Status.Addresses, got.Status.Listeners)
		}
		vip, fip = got.Status.Addresses[0].Value, got.Status.Addresses[1].Value
		return onlyCondition(got.Status.Listeners[0].Conditions, "Programmed", metav1.ConditionTrue, got.Generation)
	})
	// HTTP is only the bytes the echo understands: the listener forwards
	// the connection whole, whatever its Host.
	e.waitServed(vip, "any.example")
	checkTraffic(t, vip, "any.example", 10)
	checkTraffic(t, fip, "other.example", 5)
	if n := ctl.count("TCPRoutes are not served"); n != 0 {
		t.Errorf("the controller said %d times that TCPRoutes are not served", n)
	}
}

// installTCPRouteV1CRD installs the module's experimental TCPRoute CRD
// with a v1 version beside v1alpha2 (the same schema, v1 stored), the
// shape the standard channel has had since v1.6.
func installTCPRouteV1CRD(t *testing.T, e *env) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "experimental", "gateway.networking.k8s.io_tcproutes.yaml")
	objs, err := kubeapi.ReadManifests(path)
	if err != nil || len(objs) != 1 {
		t.Fatalf("read %s: %d objects, %v", path, len(objs), err)
	}
	crd := objs[0]
	versions, _, err := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if err != nil || len(versions) != 1 {
		t.Fatalf("the TCPRoute CRD's versions: %v %v", versions, err)
	}
	alpha := versions[0].(map[string]any)
	v1 := deepCopyMap(alpha)
	v1["name"], v1["storage"], alpha["storage"] = "v1", true, false
	if err := unstructured.SetNestedSlice(crd.Object, []any{alpha, v1}, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := kubeapi.Apply(ctx, e.srv.Config(), false, crd); err != nil {
		t.Fatalf("install the TCPRoute CRD: %v", err)
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
