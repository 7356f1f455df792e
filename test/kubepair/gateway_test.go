//go:build linux

package kubepair

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"pier.dev/pier/internal/model"
	"pier.dev/pier/test/kubeapi"
)

// gatewayName is the Gateway of the Gateway world; its HTTPRoute sends
// host to the echo Service as the Ingress world's Ingress does.
const gatewayName = "ha-gw"

// TestKubePairGateway: a Gateway is a load balancer like an
// Ingress's, so the active/standby pair holds for it unchanged: placed on
// both nodes, one MASTER and one BACKUP, and under steady traffic through
// its VIP, kill -9 of the holder's HAProxy and a planned handover
// (cordon the holder) move its addresses within the pair's targets.
func TestKubePairGateway(t *testing.T) {
	w := newWorldOf(t, worldOptions{gateway: true})
	lb, err := w.waitLB(2*time.Minute, "the Gateway's load balancer placed on two nodes, one MASTER and one BACKUP reported", func(lb *model.LoadBalancer) bool {
		p, r := lb.Placement, roles(lb)
		return len(lb.Sources) == 1 && lb.Sources[0].Kind == model.KindGateway &&
			p.Active != "" && p.Standby != "" && p.Active != p.Standby && lb.VIP != "" && lb.FIP != "" &&
			(r[p.Active] == model.VRRPMaster && r[p.Standby] == model.VRRPBackup ||
				r[p.Active] == model.VRRPBackup && r[p.Standby] == model.VRRPMaster)
	})
	if err != nil {
		t.Fatal(err)
	}
	vip, fip := netip.MustParseAddr(lb.VIP), netip.MustParseAddr(lb.FIP)
	t.Run("kill -9 the holder's HAProxy", func(t *testing.T) {
		holder, other, _ := w.settled(t, vip)
		killHolderHAProxy(t, w, vip, fip, holder, other)
	})
	t.Run("planned handover: cordon the holder", func(t *testing.T) {
		holder, other, _ := w.settled(t, vip)
		planned(t, w, vip, fip, holder, other)
	})
}

// createGateway installs the Gateway API CRDs of pier's go.mod (from the
// module cache) and applies a GatewayClass of pier's, a Gateway with an
// HTTP listener on port 80 and an HTTPRoute for host to the echo Service.
func (w *world) createGateway(ctx context.Context) error {
	crds, err := kubeapi.GatewayCRDFiles()
	if err != nil {
		return err
	}
	if err := kubeapi.ApplyFiles(ctx, w.srv.Config(), crds...); err != nil {
		return fmt.Errorf("install the Gateway API CRDs: %w", err)
	}
	objects := filepath.Join(w.dir, "gateway.yaml")
	doc := `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: pier}
spec: {controllerName: pier.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: ` + gatewayName + `, namespace: ` + appNS + `}
spec:
  gatewayClassName: pier
  listeners: [{name: http, protocol: HTTP, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: ` + gatewayName + `, namespace: ` + appNS + `}
spec:
  parentRefs: [{name: ` + gatewayName + `}]
  hostnames: [` + host + `]
  rules: [{backendRefs: [{name: echo, port: 80}]}]
`
	if err := os.WriteFile(objects, []byte(doc), 0o600); err != nil {
		return err
	}
	// The CRDs were just created: their kinds can take a moment to be
	// served.
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := kubeapi.ApplyFiles(ctx, w.srv.Config(), objects)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("apply the Gateway and its route: %w", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// deleteGateway removes what createGateway applied but the CRDs, which
// later worlds of the process may use.
func (w *world) deleteGateway(ctx context.Context) {
	gw := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: resource}
	}
	_ = w.dyn.Resource(gw("httproutes")).Namespace(appNS).Delete(ctx, gatewayName, metav1.DeleteOptions{})
	_ = w.dyn.Resource(gw("gateways")).Namespace(appNS).Delete(ctx, gatewayName, metav1.DeleteOptions{})
	_ = w.dyn.Resource(gw("gatewayclasses")).Delete(ctx, "pier", metav1.DeleteOptions{})
}
