package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/source"
)

// UDPRoutes (v1alpha2 only) are watched when the experimental channel's
// CRD is served and listable; without it or without RBAC for it the rest
// of the Gateway API is served, and the log says why once.
func TestSourceUDPRoutes(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	route := &gwv1alpha2.UDPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "u"}}
	standard := []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes"}
	for _, c := range []struct {
		name       string
		v1alpha2   []string
		forbidden  bool
		wantRoutes int
		wantLog    string
	}{
		{"served", []string{"tcproutes", "udproutes"}, false, 1, ""},
		{"no v1alpha2", nil, false, 0, "v1alpha2 is not served: install the experimental channel's UDPRoute CRD"},
		{"not served", []string{"tcproutes"}, false, 0, "does not serve udproutes"},
		{"forbidden", []string{"udproutes"}, true, 0, "listing udproutes is forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
			client.Resources = gatewayDiscoveryWith(standard, []string{"referencegrants"}, c.v1alpha2)
			gwClient := gwfake.NewSimpleClientset()
			if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gwClient.GatewayV1alpha2().UDPRoutes("default").Create(ctx, route, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if c.forbidden {
				gwClient.PrependReactor("list", "udproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: gwv1.GroupName, Resource: "udproutes"}, "", nil)
				})
			}
			logs := &syncBuffer{}
			src := New(client, Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
				Gateway: gwClient, GatewayRecheck: 20 * time.Millisecond}, slog.New(slog.NewTextHandler(logs, nil)))
			snaps := make(chan *source.Snapshot, 10)
			go func() { _ = src.Run(ctx, func(s *source.Snapshot) { snaps <- s }) }()
			select {
			case s := <-snaps:
				if len(s.Gateways) != 1 || len(s.UDPRoutes) != c.wantRoutes {
					t.Fatalf("snapshot gateways %d udproutes %d, want 1 and %d", len(s.Gateways), len(s.UDPRoutes), c.wantRoutes)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no snapshot")
			}
			if c.wantLog != "" && strings.Count(logs.String(), c.wantLog) != 1 {
				t.Errorf("the log does not say once %q:\n%s", c.wantLog, logs)
			}
			if strings.Contains(logs.String(), "support is off") {
				t.Errorf("Gateway API support turned off:\n%s", logs)
			}
		})
	}
}
