package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/pipeline"
)

type oneGateway struct{}

func (oneGateway) Gateways() []pipeline.GatewayState {
	gw := &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "web", CreationTimestamp: metav1.NewTime(time.Now())},
		Spec: gwv1.GatewaySpec{GatewayClassName: "pier"}}
	return []pipeline.GatewayState{{Gateway: gw, LoadBalancer: "u1"}}
}

func (oneGateway) HTTPRoutes() []pipeline.HTTPRouteState { return []pipeline.HTTPRouteState{} }
func (oneGateway) Routes() []pipeline.RouteState {
	return []pipeline.RouteState{{Kind: "UDPRoute", Meta: metav1.ObjectMeta{Namespace: "demo", Name: "dns", CreationTimestamp: metav1.NewTime(time.Now())}}}
}

// pier get takes gateways and httproutes beside loadbalancers, in a table
// or as the API's JSON, and refuses other kinds with its usage.
func TestGetGateways(t *testing.T) {
	srv := httptest.NewServer((&api.Server{Gateways: oneGateway{}, Registry: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}).Handler())
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	var out, errOut bytes.Buffer
	if err := getCommand(context.Background(), []string{"gtw", "--api-addr", addr}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "NAMESPACE") || !strings.Contains(out.String(), "demo        web    pier    -           Unknown      u1") {
		t.Errorf("table:\n%s", out.String())
	}
	out.Reset()
	if err := getCommand(context.Background(), []string{"gateways", "-o", "json", "--api-addr", addr}, &out, &errOut); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []api.GatewayResponse `json:"items"`
	}
	if err := json.Unmarshal(out.Bytes(), &list); err != nil || len(list.Items) != 1 || list.Items[0].LoadBalancer != "u1" {
		t.Errorf("json: %v %s", err, out.String())
	}
	out.Reset()
	if err := getCommand(context.Background(), []string{"httproutes", "--api-addr", addr}, &out, &errOut); err != nil ||
		strings.TrimSpace(out.String()) != "NAMESPACE   NAME   HOSTNAMES   PARENTS   ACCEPTED   AGE" {
		t.Errorf("httproutes: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := getCommand(context.Background(), []string{"routes", "--api-addr", addr}, &out, &errOut); err != nil ||
		!strings.HasPrefix(out.String(), "KIND") || !strings.Contains(out.String(), "UDPRoute   demo        dns    -           -         -          0") {
		t.Errorf("routes: %v\n%s", err, out.String())
	}
	if err := getCommand(context.Background(), []string{"ingresses"}, &out, &errOut); !errors.Is(err, errUsage) ||
		!strings.Contains(errOut.String(), "loadbalancers|gateways|httproutes") {
		t.Errorf("unknown kind: %v %q", err, errOut.String())
	}
	if err := getCommand(context.Background(), []string{"gateways", "-o", "yaml", "--api-addr", addr}, &out, &errOut); err == nil {
		t.Error("-o yaml accepted")
	}
}
