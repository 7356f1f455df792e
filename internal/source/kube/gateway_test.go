package kube

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/source"
)

func gatewayDiscovery(v1 []string, v1beta1 []string) []*metav1.APIResourceList {
	return gatewayDiscoveryWith(v1, v1beta1, nil)
}

// gatewayDiscoveryWith also serves v1alpha2 (the experimental channel's
// TCPRoute) when v1alpha2 is not nil.
func gatewayDiscoveryWith(v1, v1beta1, v1alpha2 []string) []*metav1.APIResourceList {
	list := func(gv string, names []string) *metav1.APIResourceList {
		l := &metav1.APIResourceList{GroupVersion: gv}
		for _, n := range names {
			l.APIResources = append(l.APIResources, metav1.APIResource{Name: n})
		}
		return l
	}
	var out []*metav1.APIResourceList
	if v1 != nil {
		out = append(out, list("gateway.networking.k8s.io/v1", v1))
	}
	if v1beta1 != nil {
		out = append(out, list("gateway.networking.k8s.io/v1beta1", v1beta1))
	}
	if v1alpha2 != nil {
		out = append(out, list("gateway.networking.k8s.io/v1alpha2", v1alpha2))
	}
	return out
}

func TestGatewayAPIServed(t *testing.T) {
	all := []string{"gatewayclasses", "gateways", "httproutes"}
	for _, tc := range []struct {
		name      string
		resources []*metav1.APIResourceList
		served    bool
		reason    string
	}{
		{"not installed", nil, false, "not installed"},
		{"standard channel", gatewayDiscovery(all, []string{"referencegrants"}), true, ""},
		{"no ReferenceGrant", gatewayDiscovery(all, []string{"gateways"}), false, "does not serve referencegrants"},
		{"no v1beta1", gatewayDiscovery(all, nil), false, "v1beta1 is not served"},
		{"no HTTPRoute", gatewayDiscovery([]string{"gatewayclasses", "gateways"}, []string{"referencegrants"}), false, "httproutes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			client.Resources = tc.resources
			served, reason, err := gatewayAPIServed(client.Discovery().(*fakediscovery.FakeDiscovery))
			if err != nil || served != tc.served || !strings.Contains(reason, tc.reason) {
				t.Errorf("served %v reason %q err %v, want %v %q", served, reason, err, tc.served, tc.reason)
			}
		})
	}
}

// syncBuffer is a log sink tests read while the source writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Without the CRDs the source still delivers snapshots (Ingresses keep
// being served) and says once why Gateway API support is off, however
// often it looks again; with them, Gateway API objects reach the
// snapshot.
func TestSourceGatewayAPI(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	grant := &gwv1beta1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "backends", Name: "g"}}
	run := func(t *testing.T, served, forbidden bool) (*syncBuffer, chan *source.Snapshot) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
		if served {
			client.Resources = gatewayDiscovery([]string{"gatewayclasses", "gateways", "httproutes"}, []string{"referencegrants"})
		}
		// Created through the client: the fake's tracker files objects
		// given to NewSimpleClientset under v1beta1, whose Gateway is the
		// same Go type.
		gwClient := gwfake.NewSimpleClientset()
		if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := gwClient.GatewayV1beta1().ReferenceGrants("backends").Create(ctx, grant, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if forbidden {
			gwClient.PrependReactor("list", "httproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: gwv1.GroupName, Resource: "httproutes"}, "", nil)
			})
		}
		logs := &syncBuffer{}
		src := New(client, Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
			Gateway: gwClient, GatewayRecheck: 20 * time.Millisecond},
			slog.New(slog.NewTextHandler(logs, nil)))
		snaps := make(chan *source.Snapshot, 10)
		go func() { _ = src.Run(ctx, func(s *source.Snapshot) { snaps <- s }) }()
		return logs, snaps
	}
	t.Run("not installed", func(t *testing.T) {
		logs, snaps := run(t, false, false)
		select {
		case s := <-snaps:
			if len(s.Nodes) != 1 || len(s.Gateways) != 0 {
				t.Errorf("snapshot nodes %d gateways %d, want 1 and 0", len(s.Nodes), len(s.Gateways))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no snapshot without the Gateway API CRDs")
		}
		time.Sleep(200 * time.Millisecond) // about ten rechecks
		if n := strings.Count(logs.String(), "Gateway API support is off"); n != 1 {
			t.Errorf("said %d times that Gateway API support is off, want once:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), "not installed") {
			t.Errorf("the log does not say why:\n%s", logs)
		}
	})
	// An RBAC without the Gateway API rules: an informer would retry its
	// forbidden list forever and hold every snapshot back.
	t.Run("forbidden", func(t *testing.T) {
		logs, snaps := run(t, true, true)
		select {
		case s := <-snaps:
			if len(s.Nodes) != 1 || len(s.Gateways) != 0 {
				t.Errorf("snapshot nodes %d gateways %d, want 1 and 0", len(s.Nodes), len(s.Gateways))
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no snapshot when listing HTTPRoutes is forbidden")
		}
		time.Sleep(100 * time.Millisecond)
		if n := strings.Count(logs.String(), "Gateway API support is off"); n != 1 || !strings.Contains(logs.String(), "forbidden") {
			t.Errorf("said %d times that support is off, want once, with why:\n%s", n, logs)
		}
	})
	t.Run("installed", func(t *testing.T) {
		logs, snaps := run(t, true, false)
		select {
		case s := <-snaps:
			if len(s.Gateways) != 1 || s.Gateways[0].Name != "gw" || len(s.ReferenceGrants) != 1 {
				t.Errorf("snapshot gateways %v grants %v", s.Gateways, s.ReferenceGrants)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no snapshot")
		}
		if strings.Contains(logs.String(), "support is off") {
			t.Errorf("said support is off with the CRDs served:\n%s", logs)
		}
	})
}

// switchedDiscovery serves the Gateway API once installed is set.
type switchedDiscovery struct {
	*fakediscovery.FakeDiscovery
	installed atomic.Bool
}

func (d *switchedDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	if d.installed.Load() {
		for _, l := range gatewayDiscovery([]string{"gatewayclasses", "gateways", "httproutes"}, []string{"referencegrants"}) {
			if l.GroupVersion == gv {
				return l, nil
			}
		}
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{}, gv)
}

// CRDs installed after the controller started: the watch turns on by
// itself, asks for a snapshot, and Gateway API objects fill it.
func TestGatewayWatchTurnsOn(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	core := fake.NewClientset()
	gwClient := gwfake.NewSimpleClientset()
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}}
	if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := &switchedDiscovery{FakeDiscovery: core.Discovery().(*fakediscovery.FakeDiscovery)}
	logs := &syncBuffer{}
	changed := make(chan struct{}, 1)
	w := &gatewayWatch{client: gwClient, discovery: d, core: core, recheck: 10 * time.Millisecond,
		logger: slog.New(slog.NewTextHandler(logs, nil)), handler: cache.ResourceEventHandlerFuncs{}}
	synced, err := w.start(ctx, changed)
	if err != nil || synced != nil {
		t.Fatalf("start: %v, %d informers, want none", err, len(synced))
	}
	snap := &source.Snapshot{}
	if err := w.fill(snap); err != nil || len(snap.Gateways) != 0 {
		t.Fatalf("fill while off: %v, %d gateways", err, len(snap.Gateways))
	}
	d.installed.Store(true)
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatalf("no snapshot asked for after the CRDs appeared:\n%s", logs)
	}
	if err := w.fill(snap); err != nil || len(snap.Gateways) != 1 {
		t.Fatalf("fill once on: %v, %d gateways", err, len(snap.Gateways))
	}
	if !strings.Contains(logs.String(), "Gateway API support is on") || strings.Count(logs.String(), "support is off") != 1 {
		t.Errorf("logs:\n%s", logs)
	}
}

// GRPCRoutes are watched when served and listable; a cluster whose CRDs
// or RBAC lack them keeps the rest of the Gateway API, and says why once.
func TestSourceGRPCRoutes(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	route := &gwv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "g"}}
	for _, c := range []struct {
		name       string
		resources  []string
		forbidden  bool
		wantRoutes int
		wantLog    string
	}{
		{"served", []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes"}, false, 1, ""},
		{"not served", []string{"gatewayclasses", "gateways", "httproutes"}, false, 0, "does not serve grpcroutes"},
		{"forbidden", []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes"}, true, 0, "listing grpcroutes is forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
			client.Resources = gatewayDiscovery(c.resources, []string{"referencegrants"})
			gwClient := gwfake.NewSimpleClientset()
			if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gwClient.GatewayV1().GRPCRoutes("default").Create(ctx, route, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if c.forbidden {
				gwClient.PrependReactor("list", "grpcroutes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: gwv1.GroupName, Resource: "grpcroutes"}, "", nil)
				})
			}
			logs := &syncBuffer{}
			src := New(client, Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
				Gateway: gwClient, GatewayRecheck: 20 * time.Millisecond}, slog.New(slog.NewTextHandler(logs, nil)))
			snaps := make(chan *source.Snapshot, 10)
			go func() { _ = src.Run(ctx, func(s *source.Snapshot) { snaps <- s }) }()
			select {
			case s := <-snaps:
				if len(s.Gateways) != 1 || len(s.GRPCRoutes) != c.wantRoutes {
					t.Errorf("snapshot gateways %d grpcroutes %d, want 1 and %d", len(s.Gateways), len(s.GRPCRoutes), c.wantRoutes)
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

// TCPRoutes are watched when the experimental channel's CRD is served and
// listable; without it (most clusters) or without RBAC for it the rest of
// the Gateway API is served, and the log says why once.
func TestSourceTCPRoutes(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	route := &gwv1alpha2.TCPRoute{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "t"}}
	standard := []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes"}
	for _, c := range []struct {
		name       string
		v1alpha2   []string
		forbidden  bool
		wantRoutes int
		wantLog    string
		v1         bool // v1 serves tcproutes, read through the dynamic client
	}{
		{"served", []string{"tcproutes"}, false, 1, "", false},
		{"no v1alpha2", nil, false, 0, "v1alpha2 is not served: install the experimental channel's TCPRoute CRD", false},
		{"not served", []string{"tlsroutes"}, false, 0, "does not serve tcproutes", false},
		{"forbidden", []string{"tcproutes"}, true, 0, "listing tcproutes is forbidden", false},
		{"v1", nil, false, 1, "", true},
		{"v1 and v1alpha2", []string{"tcproutes"}, false, 1, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
			v1 := standard
			var dyn *dynamicfake.FakeDynamicClient
			if c.v1 {
				v1 = append(append([]string(nil), standard...), "tcproutes")
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("gateway.networking.k8s.io/v1")
				u.SetKind("TCPRoute")
				u.SetNamespace("default")
				u.SetName("v1")
				_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "gw", "sectionName": "db"}}, "spec", "parentRefs")
				dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
					map[schema.GroupVersionResource]string{TCPRouteV1: "TCPRouteList"}, u)
			}
			client.Resources = gatewayDiscoveryWith(v1, []string{"referencegrants"}, c.v1alpha2)
			gwClient := gwfake.NewSimpleClientset()
			if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gwClient.GatewayV1alpha2().TCPRoutes("default").Create(ctx, route, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if c.forbidden {
				gwClient.PrependReactor("list", "tcproutes", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: gwv1.GroupName, Resource: "tcproutes"}, "", nil)
				})
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
				if len(s.Gateways) != 1 || len(s.TCPRoutes) != c.wantRoutes {
					t.Fatalf("snapshot gateways %d tcproutes %d, want 1 and %d", len(s.Gateways), len(s.TCPRoutes), c.wantRoutes)
				}
				// v1 is preferred when served, and read into the
				// v1alpha2 type with its fields and version.
				if r := s.TCPRoutes; c.v1 && (r[0].Name != "v1" || r[0].APIVersion != "gateway.networking.k8s.io/v1" ||
					len(r[0].Spec.ParentRefs) != 1 || *r[0].Spec.ParentRefs[0].SectionName != "db") {
					t.Errorf("the v1 TCPRoute read as %+v", r[0])
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

// TLSRoutes are watched through the dynamic client at the newest
// version served (v1 before v1alpha2), read into the v1alpha2 type with
// the version kept; none served leaves the rest of the Gateway API
// served, and the log says why once.
func TestSourceTLSRoutes(t *testing.T) {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gw"}, Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	standard := []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes"}
	for _, c := range []struct {
		name       string
		v1, alpha2 bool
		want       string // the version read; "" for none
	}{
		{"v1", true, false, "v1"},
		{"v1 and v1alpha2", true, true, "v1"},
		{"v1alpha2", false, true, "v1alpha2"},
		{"none", false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			client := fake.NewClientset(readyNode("a"), NewAgentLease(leaseNS, "a", time.Hour, time.Now()))
			v1, alpha2 := standard, []string{"tcproutes"}
			var objs []runtime.Object
			kinds := map[schema.GroupVersionResource]string{}
			for _, v := range []struct {
				version string
				on      bool
			}{{"v1", c.v1}, {"v1alpha2", c.alpha2}} {
				if !v.on {
					continue
				}
				if v.version == "v1" {
					v1 = append(append([]string(nil), standard...), "tlsroutes")
				} else {
					alpha2 = append(alpha2, "tlsroutes")
				}
				u := &unstructured.Unstructured{}
				u.SetAPIVersion("gateway.networking.k8s.io/" + v.version)
				u.SetKind("TLSRoute")
				u.SetNamespace("default")
				u.SetName("at-" + v.version)
				_ = unstructured.SetNestedStringSlice(u.Object, []string{"a.example"}, "spec", "hostnames")
				objs = append(objs, u)
				kinds[TLSRouteResource(v.version)] = "TLSRouteList"
			}
			kinds[TLSRouteResource("v1alpha3")] = "TLSRouteList"
			dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), kinds, objs...)
			client.Resources = gatewayDiscoveryWith(v1, []string{"referencegrants"}, alpha2)
			gwClient := gwfake.NewSimpleClientset()
			if _, err := gwClient.GatewayV1().Gateways("default").Create(ctx, gw, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			logs := &syncBuffer{}
			opts := Options{LeaseNamespace: leaseNS, Quiet: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond,
				Gateway: gwClient, Dynamic: dyn, GatewayRecheck: 20 * time.Millisecond}
			src := New(client, opts, slog.New(slog.NewTextHandler(logs, nil)))
			snaps := make(chan *source.Snapshot, 10)
			go func() { _ = src.Run(ctx, func(s *source.Snapshot) { snaps <- s }) }()
			select {
			case s := <-snaps:
				if len(s.Gateways) != 1 {
					t.Fatalf("snapshot gateways %d", len(s.Gateways))
				}
				switch {
				case c.want == "" && len(s.TLSRoutes) != 0:
					t.Errorf("TLSRoutes %+v, want none", s.TLSRoutes)
				case c.want != "" && (len(s.TLSRoutes) != 1 || s.TLSRoutes[0].Name != "at-"+c.want ||
					s.TLSRoutes[0].APIVersion != "gateway.networking.k8s.io/"+c.want || len(s.TLSRoutes[0].Spec.Hostnames) != 1):
					t.Errorf("TLSRoutes %+v, want the one at %s", s.TLSRoutes, c.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no snapshot")
			}
			if c.want == "" && strings.Count(logs.String(), "TLSRoutes are not served") != 1 {
				t.Errorf("the log does not say once why TLSRoutes are not served:\n%s", logs)
			}
		})
	}
}
