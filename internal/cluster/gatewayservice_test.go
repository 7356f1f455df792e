package cluster

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"pier.dev/pier/internal/gatewayapi"
	"pier.dev/pier/internal/model"
	"pier.dev/pier/internal/source"
	"pier.dev/pier/internal/translate"
)

// snapshotOf reads back the Services and EndpointSlices the writer made,
// as the informers would show them on the next pass.
func snapshotOf(t *testing.T, client *fake.Clientset, gws ...*gwv1.Gateway) *source.Snapshot {
	t.Helper()
	snap := &source.Snapshot{Gateways: gws}
	svcs, err := client.CoreV1().Services("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range svcs.Items {
		snap.Services = append(snap.Services, &svcs.Items[i])
	}
	ess, err := client.DiscoveryV1().EndpointSlices("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range ess.Items {
		snap.EndpointSlices = append(snap.EndpointSlices, &ess.Items[i])
	}
	return snap
}

func writes(client *fake.Clientset) int {
	n := 0
	for _, a := range client.Actions() {
		if a.GetVerb() != "list" && a.GetVerb() != "get" {
			n++
		}
	}
	return n
}

// An accepted Gateway gets its Service "<gateway>-pier" and EndpointSlice
// with its infrastructure labels and annotations, the gateway-name and
// managed-by labels, its listener ports and its IPv4 addresses, owned by
// the Gateway; a second pass writes nothing; new labels and addresses
// are updated; a user's Service of that name is never touched; a
// Gateway no longer served loses its Service; a Gateway of another
// controller keeps the one it has.
func TestGatewayServicePublished(t *testing.T) {
	ctx := context.Background()
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "gw", UID: "g1"}}
	taken := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "taken", UID: "g2"}}
	users := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "infra", Name: "taken-pier", Labels: map[string]string{"app": "mine"}}}
	client := fake.NewClientset(users)
	w := newStatusWriter(client, gwfake.NewSimpleClientset(), ourController, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ref := model.ObjectRef{Kind: model.KindGateway, Namespace: "infra", Name: "gw"}
	takenRef := model.ObjectRef{Kind: model.KindGateway, Namespace: "infra", Name: "taken"}
	ip := gwv1.IPAddressType
	st := &translate.GatewayStatus{
		Gateways: map[model.ObjectRef]gwv1.GatewayStatus{
			ref:      {Addresses: []gwv1.GatewayStatusAddress{{Type: &ip, Value: "10.250.3.7"}, {Type: &ip, Value: "fd00::7"}}},
			takenRef: {},
		},
		Infrastructure: map[model.ObjectRef]translate.GatewayInfrastructure{
			ref: {Labels: map[string]string{"key2": "value2"}, Annotations: map[string]string{"key1": "value1"},
				Ports: []translate.GatewayPort{{Port: 53, Protocol: "UDP"}, {Port: 80, Protocol: "TCP"}}},
			takenRef: {Ports: []translate.GatewayPort{{Port: 80, Protocol: "TCP"}}},
		},
	}
	w.publishGatewayServices(ctx, snapshotOf(t, client, gw, taken), st)

	svc, err := client.CoreV1().Services("infra").Get(ctx, "gw-pier", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no Service: %v", err)
	}
	wantLabels := map[string]string{"key2": "value2", gatewayapi.GatewayNameLabel: "gw", gatewayapi.ManagedByLabel: gatewayapi.ManagedByValue}
	if !maps.Equal(svc.Labels, wantLabels) || !maps.Equal(svc.Annotations, map[string]string{"key1": "value1"}) {
		t.Errorf("Service labels %v annotations %v", svc.Labels, svc.Annotations)
	}
	if len(svc.OwnerReferences) != 1 || svc.OwnerReferences[0].UID != "g1" || svc.OwnerReferences[0].Kind != "Gateway" {
		t.Errorf("owner %+v", svc.OwnerReferences)
	}
	if svc.Spec.Selector != nil || len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Name != "udp-53" || svc.Spec.Ports[0].Protocol != corev1.ProtocolUDP ||
		svc.Spec.Ports[1].Port != 80 || svc.Spec.Ports[1].TargetPort.IntVal != 80 {
		t.Errorf("Service spec %+v", svc.Spec)
	}
	es, err := client.DiscoveryV1().EndpointSlices("infra").Get(ctx, "gw-pier", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("no EndpointSlice: %v", err)
	}
	if es.Labels[discoveryv1.LabelServiceName] != "gw-pier" || es.Labels[discoveryv1.LabelManagedBy] != endpointSliceManagedBy ||
		es.Labels["key2"] != "value2" || es.Annotations["key1"] != "value1" {
		t.Errorf("EndpointSlice labels %v annotations %v", es.Labels, es.Annotations)
	}
	// The API server refuses an object whose labels are not valid: the
	// fake client does not check them, so check them here.
	for _, m := range []map[string]string{svc.Labels, es.Labels} {
		for k, v := range m {
			if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
				t.Errorf("label %s=%s: %v", k, v, errs)
			}
		}
	}
	if len(es.Endpoints) != 1 || es.Endpoints[0].Addresses[0] != "10.250.3.7" || len(es.Ports) != 2 || *es.Ports[1].Name != "tcp-80" {
		t.Errorf("EndpointSlice endpoints %+v ports %+v", es.Endpoints, es.Ports)
	}
	if got, _ := client.CoreV1().Services("infra").Get(ctx, "taken-pier", metav1.GetOptions{}); !maps.Equal(got.Labels, users.Labels) {
		t.Errorf("the user's Service was changed: %+v", got.ObjectMeta)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("infra").Get(ctx, "taken-pier", metav1.GetOptions{}); err == nil {
		t.Error("an EndpointSlice for the user's Service")
	}

	before := writes(client)
	w.publishGatewayServices(ctx, snapshotOf(t, client, gw, taken), st)
	if n := writes(client) - before; n != 0 {
		t.Errorf("second pass: %d writes, want none", n)
	}

	infra := st.Infrastructure[ref]
	infra.Labels = map[string]string{"key3": "value3"}
	st.Infrastructure[ref] = infra
	st.Gateways[ref] = gwv1.GatewayStatus{Addresses: []gwv1.GatewayStatusAddress{{Type: &ip, Value: "10.250.3.8"}}}
	w.publishGatewayServices(ctx, snapshotOf(t, client, gw, taken), st)
	svc, _ = client.CoreV1().Services("infra").Get(ctx, "gw-pier", metav1.GetOptions{})
	es, _ = client.DiscoveryV1().EndpointSlices("infra").Get(ctx, "gw-pier", metav1.GetOptions{})
	if svc.Labels["key3"] != "value3" || svc.Labels["key2"] != "" || es.Endpoints[0].Addresses[0] != "10.250.3.8" {
		t.Errorf("not updated: labels %v, endpoints %+v", svc.Labels, es.Endpoints)
	}

	// Another controller's Gateway (no status of ours) keeps its Service.
	other := *st
	other.Gateways = map[model.ObjectRef]gwv1.GatewayStatus{takenRef: {}}
	other.Infrastructure = map[model.ObjectRef]translate.GatewayInfrastructure{}
	w.publishGatewayServices(ctx, snapshotOf(t, client, gw, taken), &other)
	if _, err := client.CoreV1().Services("infra").Get(ctx, "gw-pier", metav1.GetOptions{}); err != nil {
		t.Errorf("the Service of a Gateway that is not ours was deleted: %v", err)
	}
	// Ours, no longer served: its Service goes; the user's stays.
	delete(st.Infrastructure, ref)
	w.publishGatewayServices(ctx, snapshotOf(t, client, gw, taken), st)
	if _, err := client.CoreV1().Services("infra").Get(ctx, "gw-pier", metav1.GetOptions{}); err == nil {
		t.Error("the Service of a Gateway no longer served is still there")
	}
	if _, err := client.CoreV1().Services("infra").Get(ctx, "taken-pier", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's Service was deleted: %v", err)
	}
}

func TestGatewayServiceName(t *testing.T) {
	for gw, want := range map[string]string{
		"gw":  "gw-pier",
		"a.b": "",
		"1gw": "",
		"x58": "x58-pier",
	} {
		if got := gatewayServiceName(gw); got != want {
			t.Errorf("%q: %q, want %q", gw, got, want)
		}
	}
	long := ""
	for range 59 {
		long += "a"
	}
	if got := gatewayServiceName(long); got != "" {
		t.Errorf("a 59-character name: %q", got)
	}
	if got := gatewayServiceName(long[:58]); got != long[:58]+"-pier" {
		t.Errorf("a 58-character name: %q", got)
	}
}
