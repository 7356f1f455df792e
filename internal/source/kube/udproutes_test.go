package kube

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/source"
)

// UDPRoutes are watched at v1 (the standard channel since Gateway API
// v1.7, through the dynamic client) when served and listable, else at
// v1alpha2 (the experimental channel); with neither, or without RBAC for
// them, the rest of the Gateway API is served, and the log says why once.
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
		v1         bool // v1 serves udproutes, read through the dynamic client
	}{
		{"served", []string{"tcproutes", "udproutes"}, false, 1, "", false},
		{"no v1alpha2", nil, false, 0, "v1alpha2 is not served: install the experimental channel's UDPRoute CRD", false},
		{"not served", []string{"tcproutes"}, false, 0, "does not serve udproutes", false},
		{"forbidden", []string{"udproutes"}, true, 0, "listing udproutes is forbidden", false},
		{"v1", nil, false, 1, "", true},
		{"v1 and v1alpha2", []string{"udproutes"}, false, 1, "", true},
		{"v1 forbidden", nil, true, 0, "listing udproutes is forbidden", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
			v1 := standard
			var dyn *dynamicfake.FakeDynamicClient
			if c.v1 {
				v1 = append(append([]string(nil), standard...), "udproutes")
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("gateway.networking.k8s.io/v1")
				u.SetKind("UDPRoute")
				u.SetNamespace("default")
				u.SetName("v1")
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "gw", "sectionName": "dns"}}, "spec", "parentRefs")
				dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
					map[schema.GroupVersionResource]string{UDPRouteV1: "UDPRouteList"}, u)
			}
			client.Resources = gatewayDiscoveryWith(v1, []string{"referencegrants"}, c.v1alpha2)
			gwClient := gwfake.NewSimpleClientset()
			if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gwClient.GatewayV1alpha2().UDPRoutes("default").Create(ctx, route, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if c.forbidden {
				forbid := func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: gwv1.GroupName, Resource: "udproutes"}, "", nil)
				}
				gwClient.PrependReactor("list", "udproutes", forbid)
				if dyn != nil {
					dyn.PrependReactor("list", "udproutes", forbid)
				}
			}
			logs := &syncBuffer{}
			opts := Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
				Gateway: gwClient, GatewayRecheck: 20 * time.Millisecond}
			if dyn != nil {
				opts.Dynamic = dyn
			}
			src := New(client, opts, slog.New(slog.NewTextHandler(logs, nil)))
			snaps := make(chan *source.Snapshot, 10)
			go func() { _ = src.Run(ctx, func(s *source.Snapshot) { snaps <- s }) }()
			select {
			case s := <-snaps:
				if len(s.Gateways) != 1 || len(s.UDPRoutes) != c.wantRoutes {
					t.Fatalf("snapshot gateways %d udproutes %d, want 1 and %d", len(s.Gateways), len(s.UDPRoutes), c.wantRoutes)
				}
				// v1 is preferred when served, and read into the
				// v1alpha2 type with its fields and version.
				if r := s.UDPRoutes; c.v1 && c.wantRoutes == 1 && (r[0].Name != "v1" || r[0].APIVersion != "gateway.networking.k8s.io/v1" ||
					len(r[0].Spec.ParentRefs) != 1 || *r[0].Spec.ParentRefs[0].SectionName != "dns") {
					t.Errorf("the v1 UDPRoute read as %+v", r[0])
				}
				// A typed v1alpha2 UDPRoute keeps no apiVersion: its
				// status is written at v1alpha2.
				if r := s.UDPRoutes; !c.v1 && c.wantRoutes == 1 && (r[0].Name != "u" || r[0].APIVersion != "") {
					t.Errorf("the v1alpha2 UDPRoute read as %+v", r[0])
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
